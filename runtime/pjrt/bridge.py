"""What the PJRT plugin (`mlirxla_pjrt.c`) calls in Python: plain functions over numpy arrays
and the runtime's Client and LoadedExecutable. The C side holds the PJRT objects and calls
these with the GIL held; an exception here becomes a PJRT error with its message (an
`MlirxlaError` keeps its one line, as INVALID_ARGUMENT).

Buffers are numpy arrays in host memory: a host buffer is a read-only view of JAX's memory
when JAX allows zero copy (it keeps that memory until the C side says the buffer let go),
else a copy; the C side copies results out of the array's memory itself.
"""

import dataclasses
import functools
import math
import os

import ml_dtypes
import numpy as np

from mlirxla.backends import registry
from mlirxla.errors import MlirxlaError
from mlirxla.mlir import stablehlo
from mlirxla.runtime.client import Client, LoadedExecutable
from mlirxla.runtime.ctypes_arrays import bytes_at
from mlirxla.runtime.devices import DeviceGrid, DeviceRun, execute_on_devices
from mlirxla.runtime.mpi_exchange import MpiExchange

from . import serialization
from .chosen_shardings import with_chosen_shardings
from .partitioned_program import PartitionedProgram
from .compile_options import BuildGrid, build_grid, compile_options_from_proto

NUM_DEVICES_OPTION = "num_devices"
PARTITIONED_PROGRAM = "partitioned.mlir"  # kept beside a compile-cache entry (`kept_partitioned_program`)
NODE_ID_OPTION, NUM_NODES_OPTION = "node_id", "num_nodes"  # jax.distributed.initialize's


def stablehlo_versions() -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(current, minimum) StableHLO versions the toolkit reads: JAX writes its portable
    artifacts for the current one."""
    def parse(text: str) -> tuple[int, ...]:
        return tuple(int(part) for part in text.split("."))
    return parse(stablehlo.get_current_version()), parse(stablehlo.get_minimum_version())


@dataclasses.dataclass(frozen=True)
class Processes:
    """This process's place in a job of several (`jax.distributed.initialize`): jax gives the
    plugin `node_id` and `num_nodes` among the client-create options; the devices are PJRT's
    numbering, process p holding p*L .. p*L+L-1, and collectives cross processes over MPI (the
    job runs under mpirun, whose rank and size must be jax's process id and count)."""

    index: int = 0
    count: int = 1
    exchange: MpiExchange | None = None

    @staticmethod
    def from_options(options: dict, local_devices: int) -> "Processes":
        count, index = int(options.get(NUM_NODES_OPTION, 1)), int(options.get(NODE_ID_OPTION, 0))
        if count <= 1:
            return Processes()
        from mlirxla.runtime import distributed

        if (distributed.process_rank(), distributed.process_count()) != (index, count):
            raise MlirxlaError(f"jax.distributed.initialize made this process {index} of {count}, but MPI made it rank "
                               f"{distributed.process_rank()} of {distributed.process_count()}: run the processes under "
                               f"mpirun -n {count} with process_id = the MPI rank")
        return Processes(index, count, MpiExchange.create(local_devices))


class PluginClient(Client):
    """The runtime client of the devices jax sees: all processes' (they compile for any of
    them), with this process's place among the processes."""

    def __init__(self, local_devices: int, processes: Processes, **options):
        super().__init__(local_devices * processes.count, **options)
        self.processes = processes


def create_client(options: dict) -> tuple[Client, int, str, int, int]:
    """The runtime client, how many virtual devices the PJRT client shows in every process and
    their kind (the backend `MLIRXLA_BACKEND` names, cpu by default), this process's index,
    and how many of the devices are this process's (the `num_devices` option)."""
    count = int(options.get(NUM_DEVICES_OPTION, 1))
    if count < 1:
        raise MlirxlaError(f"the {NUM_DEVICES_OPTION} option must be at least 1, got {count}")
    backend = registry.from_environment()
    from mlirxla.report import profile

    profile.record_from_environment()  # MLIRXLA_PROFILE=DIR: a trace of the whole process, written at exit
    processes = Processes.from_options(options, count)
    client = PluginClient(count, processes, cache_dir=os.environ.get("MLIRXLA_CACHE_DIR"), backend=backend)
    return client, count * processes.count, backend, processes.index, count


def compile(client: Client, code: bytes, program_format: str,
            options: bytes | None) -> tuple[LoadedExecutable, tuple[int, ...], bytes, bytes]:
    """(executable, the devices it runs on by flattened id, the program, the compile options):
    the C side keeps the program and options for OptimizedProgram, Serialize and the cost
    analysis."""
    if program_format != "mlir":
        raise MlirxlaError(f"mlirxla compiles programs in format 'mlir' (StableHLO), not '{program_format}'")
    grid = build_grid(options)
    with PartitionedProgram(grid.partition_count) as partitioned:
        loaded = client.compile(code, compile_options_from_proto(options))
    shown = with_chosen_shardings(code, loaded, kept_partitioned_program(client, loaded, partitioned.text))
    return loaded, executable_devices(loaded, grid), shown, options or b""


def kept_partitioned_program(client: Client, loaded: LoadedExecutable, text: str | None) -> str | None:
    """The partitioned program this compile made, kept beside its compile-cache entry; or,
    for a compile the cache served, the one kept by the compile that filled the entry."""
    if client.cache is None:
        return text
    if text is not None:
        client.cache.attach(loaded.fingerprint, PARTITIONED_PROGRAM, text.encode())
        return text
    kept = client.cache.attached(loaded.fingerprint, PARTITIONED_PROGRAM)
    return kept.decode(errors="replace") if kept is not None else None


def executable_devices(loaded: LoadedExecutable, grid: BuildGrid) -> tuple[int, ...]:
    """The devices the executable runs on, by flattened id: those the build options assign,
    else the first ones. The program's own grid (mhlo.num_replicas / mhlo.num_partitions)
    and the options' counts must agree."""
    plan = loaded.executable.plan
    program = (plan.replica_count, plan.partition_count)
    asked = (grid.replica_count or program[0], grid.partition_count or program[1])
    if asked != program:
        raise MlirxlaError(f"the program is for {program[0]} replica(s) x {program[1]} partition(s) (mhlo.num_replicas, "
                           f"mhlo.num_partitions) but its compile options ask for {asked[0]} x {asked[1]}")
    count = program[0] * program[1]
    if count > 1 and not loaded.client.backend.runs_collectives:
        raise MlirxlaError(f"the {loaded.client.backend.name} backend runs a program on one device, not on {count}")
    devices = grid.devices or tuple(range(count))
    if len(devices) != count:
        raise MlirxlaError(f"the compile options assign {len(devices)} device(s) to {program[0]} replica(s) x {program[1]} partition(s)")
    if len(set(devices)) != count:
        raise MlirxlaError(f"the compile options assign a device twice: {list(devices)}")
    return devices


def serialize(executable: LoadedExecutable, program: bytes, options: bytes, devices: tuple[int, ...]) -> bytes:
    return serialization.serialize(serialization.SerializedExecutable(executable, tuple(devices), program, options))


def deserialize(client: Client, data: bytes, overriding_options: bytes | None) -> tuple[LoadedExecutable, tuple[int, ...], bytes, bytes]:
    """What `compile` returns, for a serialized executable; compile options given at load time
    choose the devices (the code is compiled already)."""
    loaded = serialization.deserialize(client, data)
    devices = executable_devices(loaded.executable, build_grid(overriding_options)) if overriding_options else loaded.devices
    return loaded.executable, devices, loaded.program, loaded.options


def cost_analysis(program: bytes, options: bytes) -> list[tuple[str, float]]:
    """XLA's cost properties of the program as the cpu pipeline optimizes it. The executable
    keeps no module, so the program is compiled again up to its optimized module (no code
    generation), one compile at a time as the client compiles."""
    from mlirxla import frontdoor
    from mlirxla.context import new_context
    from mlirxla.pipelines import named_pipeline
    from mlirxla.pipelines.runner import PipelineRunner, RunOptions
    from mlirxla.runtime.client import _COMPILING
    from mlirxla.transforms.cost_analysis import module_cost

    run_options = RunOptions(disable_passes=frozenset(compile_options_from_proto(options).disable_passes), render_reports=False)
    with _COMPILING:
        module = frontdoor.import_bytes(program, "<cost analysis>", new_context()).module
        PipelineRunner(module, run_options).compile(named_pipeline("cpu"))
        with module.context:
            return module_cost(module).properties()


def executable_info(executable: LoadedExecutable) -> tuple[str, str, list, tuple[int, ...], int, int]:
    """(name, fingerprint, [(element type name, dims, memory kind)] per output, donatable
    parameters, replica count, partition count). Donatable are the parameters the program marks
    donated, and any an output is computed in: as on XLA, jax's donated buffer is gone after the
    call even where no output took its memory."""
    plan = executable.executable.plan
    outputs = [(np.dtype(spec.dtype).name, tuple(spec.shape), plan.memory_kind_of_output(index))
               for index, (_, spec) in enumerate(plan.outputs)]
    donatable = executable.executable.written_parameters | frozenset(plan.donated_parameters)
    return ("main", executable.fingerprint, outputs, tuple(sorted(donatable)),
            plan.replica_count, plan.partition_count)


def parameter_types(executable: LoadedExecutable) -> list[tuple[str, tuple[int, ...]]]:
    """(element type name, dims) per parameter, as `executable_info` names the outputs'."""
    return [(np.dtype(spec.dtype).name, tuple(spec.shape)) for spec in executable.executable.plan.parameters]


def native_plan(executable: LoadedExecutable) -> tuple | None:
    """How the C side runs an execution itself (`Executable.native_plan`), or None."""
    return executable.executable.native_plan()


def memory_stats(executable: LoadedExecutable) -> tuple[int, int, int, int, int]:
    """(native code, parameter, output, parameter bytes holding outputs, temp bytes): temps are
    the slab, the kernels' scratch and im2col rows inside it."""
    inner = executable.executable
    plan = inner.plan
    by_kind = {}
    for kind, size in zip(plan.allocation_kinds, plan.allocation_sizes):
        by_kind[kind] = by_kind.get(kind, 0) + size
    aliased = sum(plan.allocation_sizes[index] for index in inner.written_parameters)
    return (len(inner.object_code), by_kind.get("parameter", 0), by_kind.get("output", 0), aliased,
            by_kind.get("temp", 0))


@functools.cache
def element_dtype(name: str) -> np.dtype:
    return np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else np.dtype(name)


def buffer_from_host(address: int, dtype_name: str, dims: tuple, byte_strides: tuple | None,
                     zero_copy: bool) -> tuple[np.ndarray, bool]:
    """The array a buffer holds for host memory at `address` (`dims` elements, with
    `byte_strides` or row-major, negative ones included), and whether it is a view of that memory. A view, read-only,
    when JAX allows it (`zero_copy`: it keeps the memory until the buffer lets go) and the
    memory is row-major and aligned to its elements; else a C-contiguous copy the runtime
    owns."""
    dtype = element_dtype(dtype_name)
    shape = tuple(dims)
    if 0 in shape:
        return np.empty(shape, dtype), False
    row_major = row_major_strides(shape, dtype.itemsize)
    strides = tuple(byte_strides) if byte_strides is not None else row_major
    if strides == row_major:
        host = np.ndarray(shape, dtype, buffer=bytes_at(address, math.prod(shape) * dtype.itemsize))
    else:
        below = sum((size - 1) * stride for size, stride in zip(shape, strides) if stride < 0)
        above = sum((size - 1) * stride for size, stride in zip(shape, strides) if stride > 0) + dtype.itemsize
        host = np.ndarray(shape, dtype, buffer=bytes_at(address + below, above - below), offset=-below, strides=strides)
    if zero_copy and strides == row_major and address % dtype.alignment == 0:
        host.flags.writeable = False
        return host, True
    return np.array(host, order="C", copy=True), False


def row_major_strides(shape: tuple, itemsize: int) -> tuple[int, ...]:
    strides, step = [], itemsize
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def copy(array: np.ndarray) -> np.ndarray:
    return array.copy()


def uninitialized_array(dtype_name: str, dims: tuple) -> np.ndarray:
    """A buffer whose contents are unspecified until written: zeros, so no stale memory shows."""
    return np.zeros(tuple(dims), element_dtype(dtype_name))


def execute(executable: LoadedExecutable, arrays: list, addresses: list, donated: list) -> list:
    """Run on one device's arguments (and their addresses); the `donated` parameters' memory
    may be written."""
    return executable.executable.execute(arrays, donated=frozenset(donated), addresses=addresses)


def execute_checked(executable: LoadedExecutable, arrays: list, addresses: list, donated: list) -> list:
    """`execute` of buffers the C side found of the parameters' element types and dimensions
    (a buffer's array is C-contiguous)."""
    return executable.executable.execute_checked(arrays, addresses, frozenset(donated))


def execute_devices(executable: LoadedExecutable, arrays: list, addresses: list, donated: list,
                    positions: tuple[int, ...], device_ids: tuple[int, ...]) -> list:
    """Run this process's devices of the executable's grid at once, one thread per device
    (their collectives meet, across processes over MPI): `arrays[i]`, `addresses[i]`,
    `donated[i]` are those of the device at flattened position `positions[i]`; `device_ids`
    are the devices of every position (which process runs each). The outputs per device. The
    C side holds the GIL while waiting here; the device threads take turns with it, and the
    kernels run without it."""
    inner = executable.executable
    grid = DeviceGrid(inner.plan.replica_count, inner.plan.partition_count)
    runs = [DeviceRun(inner, frozenset(indices), list(at)) for indices, at in zip(donated, addresses)]
    if len(positions) == grid.device_count:
        return execute_on_devices(runs, arrays, grid)
    exchange = executable.client.processes.exchange
    exchange = exchange.placed(tuple(exchange.process_of(device) for device in device_ids))
    return execute_on_devices(runs, arrays, grid, local=list(positions), exchange=exchange)


# jax's profiler, through the plugin's PJRT profiler extension (`report/xspace.py`): create,
# start, stop, collect (the XSpace's bytes); the C side keeps the feed per profiler session.

def profiler_create(options: bytes):
    from mlirxla.report.xspace import JaxProfilerFeed

    return JaxProfilerFeed(options)


def profiler_start(feed) -> None:
    feed.start()


def profiler_stop(feed) -> None:
    feed.stop()


def profiler_collect(feed) -> bytes:
    return feed.collect()
