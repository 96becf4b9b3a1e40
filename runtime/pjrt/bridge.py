"""What the PJRT plugin (`mlirxla_pjrt.c`) calls in Python: plain functions over numpy arrays
and the runtime's Client and LoadedExecutable. The C side holds the PJRT objects and calls
these with the GIL held; an exception here becomes a PJRT error with its message (an
`MlirxlaError` keeps its one line, as INVALID_ARGUMENT).

Buffers are numpy arrays in host memory: a host buffer is a read-only view of JAX's memory
when JAX allows zero copy (it keeps that memory until the C side says the buffer let go),
else a copy; the C side copies results out of the array's memory itself.
"""

import ctypes
import os

import ml_dtypes
import numpy as np

from mlirxla.backends import registry
from mlirxla.errors import MlirxlaError
from mlirxla.mlir import stablehlo
from mlirxla.runtime.client import Client, LoadedExecutable

from . import serialization
from .compile_options import assigned_device, compile_options_from_proto

NUM_DEVICES_OPTION = "num_devices"


def stablehlo_versions() -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(current, minimum) StableHLO versions the toolkit reads: JAX writes its portable
    artifacts for the current one."""
    def parse(text: str) -> tuple[int, ...]:
        return tuple(int(part) for part in text.split("."))
    return parse(stablehlo.get_current_version()), parse(stablehlo.get_minimum_version())


def create_client(options: dict) -> tuple[Client, int, str]:
    """The runtime client, how many virtual devices the PJRT client shows, and their kind: the
    backend `MLIRXLA_BACKEND` names (cpu by default)."""
    count = int(options.get(NUM_DEVICES_OPTION, 1))
    if count < 1:
        raise MlirxlaError(f"the {NUM_DEVICES_OPTION} option must be at least 1, got {count}")
    backend = registry.from_environment()
    return Client(cache_dir=os.environ.get("MLIRXLA_CACHE_DIR"), backend=backend), count, backend


def compile(client: Client, code: bytes, program_format: str,
            options: bytes | None) -> tuple[LoadedExecutable, int, bytes, bytes]:
    """(executable, the device it is compiled for, the program, the compile options): the C
    side keeps the program and options for OptimizedProgram, Serialize and the cost analysis."""
    if program_format != "mlir":
        raise MlirxlaError(f"mlirxla compiles programs in format 'mlir' (StableHLO), not '{program_format}'")
    device = assigned_device(options)
    return client.compile(code, compile_options_from_proto(options)), device, code, options or b""


def serialize(executable: LoadedExecutable, program: bytes, options: bytes, device: int) -> bytes:
    return serialization.serialize(serialization.SerializedExecutable(executable, device, program, options))


def deserialize(client: Client, data: bytes, overriding_options: bytes | None) -> tuple[LoadedExecutable, int, bytes, bytes]:
    """What `compile` returns, for a serialized executable; compile options given at load time
    choose the device (the code is compiled already)."""
    loaded = serialization.deserialize(client, data)
    device = assigned_device(overriding_options) if overriding_options else loaded.device
    return loaded.executable, device, loaded.program, loaded.options


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

    run_options = RunOptions(disable_passes=frozenset(compile_options_from_proto(options).disable_passes))
    with _COMPILING:
        module = frontdoor.import_bytes(program, "<cost analysis>", new_context()).module
        PipelineRunner(module, run_options).compile(named_pipeline("cpu"))
        with module.context:
            return module_cost(module).properties()


def executable_info(executable: LoadedExecutable) -> tuple[str, str, list, tuple[int, ...]]:
    """(name, fingerprint, [(element type name, dims)] per output, donatable parameters)."""
    plan = executable.executable.plan
    outputs = [(np.dtype(spec.dtype).name, tuple(spec.shape)) for _, spec in plan.outputs]
    return "main", executable.fingerprint, outputs, tuple(sorted(executable.executable.written_parameters))


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
    count = int(np.prod(shape, dtype=np.int64))
    if count == 0:
        return np.empty(shape, dtype), False
    row_major = row_major_strides(shape, dtype.itemsize)
    strides = tuple(byte_strides) if byte_strides is not None else row_major
    below = sum((size - 1) * stride for size, stride in zip(shape, strides) if stride < 0)
    above = sum((size - 1) * stride for size, stride in zip(shape, strides) if stride > 0) + dtype.itemsize
    memory = (ctypes.c_char * (above - below)).from_address(address + below)
    host = np.ndarray(shape, dtype, buffer=memory, offset=-below, strides=strides)
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
