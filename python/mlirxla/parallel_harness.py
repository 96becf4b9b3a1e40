"""`interpreter.run_parallel`, the StableHLO interpreter tests' way to run programs on a grid
of devices, taken apart into what mlirxla runs.

A test's `main` computes inputs, calls `run_parallel` with `programs = [[@f, ...], ...]` (a
row per replica, a column per partition) and, optionally, `infeed = [@q0, ...]` (functions
whose results fill every device's infeed, in order), then checks what the call returns. The
call's operands are the programs' arguments and its results their results, device after
device in row-major order.

The harness parses the test once and builds three modules from it:

- the inputs: `main` up to the call, returning the call's tensor operands and the infeed
  functions' results;
- the programs: the test without `main`, its replica and partition counts the grid's,
  compiled once per distinct program function and run on all devices at once
  (`runtime/devices.py`);
- the checks: `main` with the call's tensor results as its arguments (the tokens it
  returned made afresh by `after_all`), judged like any test function's checks.
"""

from dataclasses import dataclass

import numpy as np

from mlirxla import frontdoor
from mlirxla.errors import MlirxlaError, location_text
from mlirxla.frontdoor.load import Loaded, load_text
from mlirxla.ir_queries import first_op_where
from mlirxla.mlir import func, ir
from mlirxla.runtime import driver
from mlirxla.runtime.devices import DeviceGrid, execute_on_devices
from mlirxla.runtime.executable import TOKEN_TYPE
from mlirxla.runtime.reference import Execution, find_function
from mlirxla.transforms.erasure import erase

RUN_PARALLEL = "interpreter.run_parallel"


@dataclass(frozen=True)
class ParallelCall:
    """What one `run_parallel` asks for: the program of each device (row-major over replicas,
    then partitions), the grid, and the infeed functions."""

    programs: list[str]
    grid: DeviceGrid
    infeed: list[str]


def symbols(attr: ir.Attribute) -> list[str]:
    return [ir.FlatSymbolRefAttr(a).value for a in ir.ArrayAttr(attr)]


def read_call(op: ir.Operation) -> ParallelCall:
    where = location_text(op.location)
    if "programs" not in op.attributes:
        raise MlirxlaError(f"{RUN_PARALLEL} has no programs", where)
    rows = [symbols(row) for row in ir.ArrayAttr(op.attributes["programs"])]
    if not rows or len({len(row) for row in rows}) != 1 or not rows[0]:
        raise MlirxlaError(f"{RUN_PARALLEL}: programs must be a non-empty grid of equal rows, got {rows}", where)
    infeed = symbols(op.attributes["infeed"]) if "infeed" in op.attributes else []
    return ParallelCall([name for row in rows for name in row], DeviceGrid(len(rows), len(rows[0])), infeed)


def is_token(value_type: ir.Type) -> bool:
    return str(value_type) == TOKEN_TYPE


def function_types(module: ir.Module, name: str) -> ir.FunctionType:
    return ir.FunctionType(ir.TypeAttr(find_function(module, name).attributes["function_type"]).value)


def the_call(module: ir.Module, entry: str) -> ir.Operation:
    call = first_op_where(find_function(module, entry).operation, lambda op: op.name == RUN_PARALLEL)
    if call is None:
        raise MlirxlaError(f"@{entry} calls no {RUN_PARALLEL}")
    return call


def clone(module: ir.Module) -> ir.Module:
    return ir.Module.parse(module.operation.get_asm(enable_debug_info=True, print_generic_op_form=True), module.context)


def erase_functions(module: ir.Module, names) -> None:
    for name in names:
        erase(find_function(module, name).operation)


def set_function_type(function: ir.Operation, inputs: list[ir.Type], results: list[ir.Type]) -> None:
    function.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, results))
    for key in ("arg_attrs", "res_attrs"):
        if key in function.attributes:
            del function.attributes[key]


def inputs_module(parsed: ir.Module, entry: str, call: ParallelCall) -> ir.Module:
    """`entry` cut after the call's operands are computed: it returns the tensor operands,
    then every infeed function's results."""
    module = clone(parsed)
    with module.context, ir.Location.unknown():
        function = find_function(module, entry).operation
        op = the_call(module, entry)
        block = function.regions[0].blocks[0]
        operations = [o.operation for o in block.operations]
        for later in reversed(operations[operations.index(op) + 1:]):
            erase(later)
        values = [v for v in op.operands if not is_token(v.type)]
        with ir.InsertionPoint(op), op.location:
            for name in call.infeed:
                produced = func.CallOp(list(function_types(module, name).results), name, [])
                values += list(produced.results)
            func.ReturnOp(values)
        erase(op)
        set_function_type(function, [], [v.type for v in values])
        erase_functions(module, set(call.programs))
    return module


def programs_module(parsed: ir.Module, entry: str, call: ParallelCall) -> ir.Module:
    """The test without `entry`, for the call's grid."""
    module = clone(parsed)
    with module.context, ir.Location.unknown():
        erase_functions(module, [entry])
        i32 = ir.IntegerType.get_signless(32)
        module.operation.attributes["mhlo.num_replicas"] = ir.IntegerAttr.get(i32, call.grid.replica_count)
        module.operation.attributes["mhlo.num_partitions"] = ir.IntegerAttr.get(i32, call.grid.partition_count)
    return module


def checks_module(parsed: ir.Module, entry: str, call: ParallelCall) -> ir.Module:
    """`entry` taking the call's tensor results as arguments; the tokens it gave made afresh."""
    module = clone(parsed)
    with module.context, ir.Location.unknown():
        function = find_function(module, entry).operation
        op = the_call(module, entry)
        block = function.regions[0].blocks[0]
        for result in op.results:
            if is_token(result.type):
                with ir.InsertionPoint(op), op.location:
                    fresh = ir.Operation.create("stablehlo.after_all", results=[result.type], operands=[])
                result.replace_all_uses_with(fresh.results[0])
            else:
                result.replace_all_uses_with(block.add_argument(result.type, op.location))
        erase(op)
        results = list(function_types(module, entry).results)
        set_function_type(function, [a.type for a in block.arguments], results)
        erase_functions(module, set(call.programs) | set(call.infeed))
    return module


def imported(module: ir.Module, source: str) -> ir.Module:
    return frontdoor.import_loaded(Loaded(module, source, "text")).module


def device_arguments(module: ir.Module, call: ParallelCall, tensors: list[np.ndarray]) -> list[list[np.ndarray]]:
    """The call's tensor operands dealt to the devices in order, an empty array per token."""
    remaining = iter(tensors)
    per_device = []
    for name in call.programs:
        per_device.append([np.zeros((0,), np.bool_) if is_token(t) else next(remaining)
                           for t in function_types(module, name).inputs])
    return per_device


def run(text: str, source: str, entry: str = "main", options=None, backend: str = "cpu") -> Execution:
    """Run the test function `entry` of `text`, whose body calls `run_parallel`: the
    `Execution` of its checks."""
    from mlirxla.context import new_context

    context = new_context()
    parsed = load_text(text, source, context).module
    with context, ir.Location.unknown():
        call = read_call(the_call(parsed, entry))
        tensor_operand_count = sum(1 for v in the_call(parsed, entry).operands if not is_token(v.type))
        inputs = imported(inputs_module(parsed, entry, call), source)
        executable, _, _ = driver.compile_entry(inputs, entry, options, backend)
        values = executable.execute([])
        operands, infeed_values = values[:tensor_operand_count], values[tensor_operand_count:]
        infeed = [[value] for value in infeed_values]

        programs = imported(programs_module(parsed, entry, call), source)
        executables = {name: driver.compile_entry(programs, name, options, backend)[0] for name in dict.fromkeys(call.programs)}
        device_count = call.grid.device_count
        outputs = execute_on_devices([executables[name] for name in call.programs],
                                     device_arguments(programs, call, operands), call.grid,
                                     infeeds=[list(infeed)] * device_count)

        results = [array for name, produced in zip(call.programs, outputs)
                   for array, result_type in zip(produced, function_types(programs, name).results) if not is_token(result_type)]
        checks = imported(checks_module(parsed, entry, call), source)
        return driver.execute(checks, results, entry, options, backend)
