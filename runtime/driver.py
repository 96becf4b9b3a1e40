"""Compile and run one function of an xhlo module with a backend, its check ops judged: the
function's checks become extra results, the clone is compiled by the backend the registry
names, run, and the results come back as attributes in an `Execution`, so that `checks.judge`
and the tools treat every backend alike (`mlirxla-run --backend`, `mlirxla-conformance`).
A module for several replicas or partitions runs on a grid of devices of this process
(`execute_on_grid`), one `Execution` per device; a module sharded over its partitions is
compiled into each partition's program and loaded on a client with the grid's devices
(`load_sharded`), which runs it on global arrays, split and assembled by its shardings.
"""

import numpy as np

from mlirxla.backends import registry
from mlirxla.dialects.xhlo.config import read_config
from mlirxla.errors import MlirxlaError
from mlirxla.ir_queries import public_entry_name
from mlirxla.mlir import ir

from . import distributed, literals
from .client import Client, LoadedExecutable
from .devices import DeviceGrid, execute_on_devices
from .executable import Executable
from .reference import CheckRecord, Execution, argument_types, check_arguments, extract_checks, find_function, trim_to_entry


def compile_entry(module: ir.Module, entry: str, options=None,
                  backend: str = registry.DEFAULT) -> tuple[Executable, list[CheckRecord], list[ir.Type]]:
    """`entry` of a clone of `module`, its checks turned into results, compiled by `backend`:
    the executable, the checks, and the types of everything it returns."""
    from mlirxla.pipelines.runner import RunOptions

    clone = ir.Module.parse(module.operation.get_asm(enable_debug_info=True, print_generic_op_form=True), module.context)
    with clone.context, ir.Location.unknown():
        function = find_function(clone, entry)
        checks = extract_checks(function.operation)
        trim_to_entry(clone, entry)
        result_types = list(ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value).results)
    executable = Executable.of(registry.backend(backend).compile(clone, options or RunOptions(backend=backend)))
    return executable, checks, result_types


def execute(module: ir.Module, arguments: list[np.ndarray], entry: str | None = None, options=None,
            backend: str = registry.DEFAULT) -> Execution:
    """Compile `entry` (default: main or the first public function) of a clone of `module`
    with `backend` and run it on numpy `arguments`, on one device."""
    grid = module_grid(module)
    if grid.device_count > 1:
        raise MlirxlaError(f"the module is for {grid.replica_count} replica(s) x {grid.partition_count} partition(s): "
                           "run it on a grid of devices (mlirxla-run runs it on its grid)")
    return execute_on_grid(module, arguments, entry, options, backend, grid)[0]


def module_grid(module: ir.Module) -> DeviceGrid:
    config = read_config(module)
    return DeviceGrid(config.replica_count, config.partition_count)


def execute_on_grid(module: ir.Module, arguments: list[np.ndarray], entry: str | None, options, backend: str,
                    grid: DeviceGrid) -> list[Execution]:
    """`execute` on every device of `grid` at once, each device given the same `arguments`
    (its collectives meet the others'): one `Execution` per device, by flattened id."""
    entry = entry or public_entry_name(module)
    check_arguments(argument_types(module, entry), arguments, entry)
    check_grid(backend, grid)
    executable, checks, result_types = compile_entry(module, entry, options, backend)
    return run_compiled(module, entry, executable, checks, result_types, arguments, grid)


def check_grid(backend: str, grid: DeviceGrid) -> None:
    """Refuse a grid of several devices to a backend that runs no collectives."""
    if grid.device_count > 1 and not registry.backend(backend).runs_collectives:
        raise MlirxlaError(f"the {backend} backend runs a program on one device, not on the {grid.device_count} "
                           f"of {grid.replica_count} replica(s) x {grid.partition_count} partition(s)")


def run_compiled(module: ir.Module, entry: str, executable: Executable, checks: list[CheckRecord], result_types: list,
                 arguments: list[np.ndarray], grid: DeviceGrid = DeviceGrid(), repeat: int = 1,
                 exchange=None) -> list[Execution]:
    """Run what `compile_entry` made on numpy `arguments` on every device of `grid` (`repeat`
    times: the last run's results are judged): one `Execution` per device. With an
    `exchange` (`mpi_exchange.MpiExchange`) this process runs its devices, the others theirs,
    and every device's outputs are gathered."""
    result_count = len(ir.FunctionType(ir.TypeAttr(find_function(module, entry).attributes["function_type"]).value).results)
    for _ in range(max(repeat, 1)):
        if exchange is not None:
            per_device = distributed.execute_per_device(executable, arguments, grid, exchange)
        elif grid.device_count == 1:
            per_device = [executable.execute(arguments)]
        else:
            per_device = execute_on_devices([executable] * grid.device_count, [arguments] * grid.device_count, grid)
    with module.context:
        return [Execution([literals.to_attribute(np.asarray(array), value_type) for array, value_type in zip(outputs, result_types)],
                          result_count, checks) for outputs in per_device]


def load_sharded(module: ir.Module, backend: str = registry.DEFAULT, options=None, entry: str | None = None,
                 exchange=None) -> LoadedExecutable:
    """`entry` of `module` compiled for its grid, on a client with the grid's devices: its
    `execute` takes sharded Arrays, its `execute_numpy` global arrays (`runtime/sharded.py`).
    With an `exchange`, the client is this process's share of them (`runtime/distributed.py`)."""
    executable, _, _ = compile_entry(module, entry or public_entry_name(module), options, backend)
    client = Client.joined(exchange, backend) if exchange is not None else Client(module_grid(module).device_count, backend=backend)
    return LoadedExecutable(executable, client, "")


def execute_sharded(module: ir.Module, arguments: list[np.ndarray], backend: str = registry.DEFAULT, options=None,
                    entry: str | None = None) -> list[np.ndarray]:
    """Compile `module` and run it once on global numpy `arguments`."""
    return load_sharded(module, backend, options, entry).execute_numpy(arguments)
