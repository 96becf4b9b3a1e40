"""The runtime API, in the shape of PJRT: Client, Device, Buffer, LoadedExecutable.

    client = Client()                                   # one host CPU device by default
    executable = client.compile(stablehlo_text_or_bytes)  # compile once ...
    outputs = executable.execute([x, w])                # ... execute many times
    outputs[0].to_numpy()

Buffers live in host memory and hold numpy arrays: `Client.buffer_from_pyval` takes a
C-contiguous array without copying (and marks it read-only, since the buffer is immutable);
`Buffer.to_numpy` hands back the same memory. Executing with `donate=[i]` gives argument i's
buffer to the executable: the buffer is deleted, and the output the module donates that
parameter to (jax.buffer_donor / tf.aliasing_output) is computed in its memory when buffer
assignment gave the output the parameter's buffer and the memory is the runtime's own (an
earlier output); host memory a buffer merely wraps is copied first, never written.

A client has `device_count` devices (`Client(device_count=8)`); a program for several
devices (`mhlo.num_partitions` / `mhlo.num_replicas`) runs on its first ones, every device's
part at once, on sharded `Array`s (`runtime/sharded.py`: `Sharding`, `Array`, exported here).

`Client(distributed=True)` is this process's client in an MPI job (`mpirun -n P python ...`):
`device_count` devices here, `P * device_count` in all (process p holds global ids p*L ..
p*L+L-1, as in PJRT); a program for all of them runs with `execute_numpy` on the same global
arrays in every process, each process running its devices' shards, their collectives over
MPI (`runtime/distributed.py`), and returns the global results in every process.

A client compiles with one backend, chosen by name (`Client(backend="reference")`, default
`cpu`; `backends/registry.py`), which its devices name as their kind.

Compilation goes through the compile cache when the client has one (`cache_dir`): the key is
the fingerprint of the input's bytes, the compile options, the backend, and the versions and
CPU that compile (so a hit skips parsing altogether). A run that asks for dumps bypasses the
cache, and writes the compile's HTML report among them (`module_NNNN.<name>.report.html`).
A compile of more than a second shows which pass or kernel it is at when stderr is a terminal.
"""

import contextlib
import functools
import hashlib
import os
import platform
import sys
import threading
from dataclasses import dataclass

import numpy as np

from mlirxla import sources
from mlirxla.errors import MlirxlaError
from mlirxla.report import progress

from mlirxla.backends import registry
from mlirxla.backends.backend import Backend

from . import compile_deadline, sharded
from .buffers import Buffer, Device
from .compile_cache import CompileCache, fingerprint
from .executable import Executable
from .sharded import Array, Shard, Sharding  # the API: `from mlirxla.runtime.client import Client, Array, Sharding`

_COMPILING = threading.Lock()


@dataclass(frozen=True)
class CompileOptions:
    """What steers a compile: dumps and the pass selection, as the pipeline runner takes them,
    and the flags the iree backend hands to IREE's compiler."""

    dump_to: str | None = None
    dump_pass_re: str | None = None
    disable_passes: tuple[str, ...] = ()
    iree_flags: tuple[str, ...] = ()
    # bf16 values read inside a cpu kernel kept in f32 (XLA's xla_allow_excess_precision);
    # None: MLIRXLA_ALLOW_EXCESS_PRECISION's setting (`backends/cpu/excess_precision.py`)
    allow_excess_precision: bool | None = None
    # cpu kernels flush denormals to zero, as XLA:CPU runs (`backends/cpu/denormal_flushing.py`);
    # None: MLIRXLA_FLUSH_DENORMALS's setting
    flush_denormals: bool | None = None
    # entry parameters without a sharding whose sharding propagation may choose (XLA's
    # allow_spmd_sharding_propagation_to_parameters); the others without one are replicated
    open_parameters: tuple[int, ...] = ()

    def key(self) -> str:
        flags = f";iree_flags={' '.join(self.iree_flags)}" if self.iree_flags else ""
        excess = "" if self.allow_excess_precision is None else f";excess_precision={int(self.allow_excess_precision)}"
        flushing = "" if self.flush_denormals is None else f";flush_denormals={int(self.flush_denormals)}"
        opened = f";open_parameters={','.join(map(str, self.open_parameters))}" if self.open_parameters else ""
        return f"disable={','.join(sorted(self.disable_passes))}{flags}{excess}{flushing}{opened}"


class LoadedExecutable:
    """A compiled program on its devices: the client's first `replica_count * partition_count`,
    by flattened id. On one device it takes and returns Buffers; on several, sharded Arrays
    (`runtime/sharded.py`)."""

    def __init__(self, executable: Executable, client: "Client", fingerprint_text: str):
        self.executable = executable
        self.client = client
        self.fingerprint = fingerprint_text

    @property
    def device_count(self) -> int:
        return self.executable.plan.replica_count * self.executable.plan.partition_count

    @property
    def devices(self) -> list[Device]:
        return self.client.devices()[:self.device_count]

    @property
    def num_outputs(self) -> int:
        return len(self.executable.plan.outputs)

    @functools.cached_property
    def global_signature(self) -> tuple[list[sharded.ArraySpec], list[sharded.ArraySpec]]:
        """The global shape, dtype and sharding of every parameter and output."""
        return sharded.global_signature(self.executable.plan, self.devices)

    @property
    def parameter_shardings(self) -> list[sharded.Sharding]:
        return [spec.sharding for spec in self.global_signature[0]]

    @property
    def output_shardings(self) -> list[sharded.Sharding]:
        return [spec.sharding for spec in self.global_signature[1]]

    def execute(self, arguments, donate: tuple[int, ...] = ()):
        """Run on `arguments`: on one device Buffers or arrays, giving Buffers; on several,
        Arrays sharded as `parameter_shardings`, giving Arrays."""
        if self.client.exchange is not None:
            raise MlirxlaError("a client across processes runs programs on global numpy arrays (execute_numpy); "
                               "its Arrays would hold other processes' shards")
        if self.device_count > 1:
            return sharded.execute(self, arguments, donate)
        arrays = []
        for index, argument in enumerate(arguments):
            if isinstance(argument, Buffer):
                arrays.append(argument.to_numpy())
            elif isinstance(argument, sharded.Array):
                raise MlirxlaError(f"argument {index} is an Array: a program for one device takes Buffers or numpy arrays")
            else:
                arrays.append(np.asarray(argument))
        outputs = self.executable.execute(arrays, donated=frozenset(donate))
        for index in donate:
            if isinstance(arguments[index], Buffer):
                arguments[index].delete()
        device = self.devices[0]
        return [Buffer(output, device) for output in outputs]

    def execute_numpy(self, arguments) -> list[np.ndarray]:
        """The fast path: arrays in, arrays out (global arrays for a program on several devices)."""
        if self.client.exchange is not None:
            from . import distributed

            return distributed.execute_sharded(self, arguments, self.client.exchange)
        if self.device_count > 1:
            return sharded.execute_numpy(self, arguments)
        return self.executable.execute(arguments)

    def thunk_sequence(self) -> str:
        return self.executable.plan.describe()


class Client:
    platform_name = "mlirxla"
    platform_version = "0.1.0"

    def __init__(self, device_count: int = 1, cache_dir: str | None = None, backend: str = registry.DEFAULT,
                 distributed: bool = False):
        if device_count < 1:
            raise MlirxlaError("a client needs at least one device")
        self.backend = registry.backend(backend)
        unavailable = self.backend.unavailable() or self.backend.runs_elsewhere
        if unavailable is not None:
            raise MlirxlaError(unavailable)
        self.cache = CompileCache(cache_dir) if cache_dir else None
        self.join(None)
        self._devices = [Device(i, self, device_kind=backend) for i in range(device_count)]
        if distributed:
            from .mpi_exchange import MpiExchange

            self.join(MpiExchange.create(device_count))

    @staticmethod
    def joined(exchange, backend: str = registry.DEFAULT) -> "Client":
        """A client of `exchange.local_devices` devices in each process of its MPI job."""
        client = Client(exchange.local_devices, backend=backend)
        client.join(exchange)
        return client

    def join(self, exchange) -> None:
        """Become this process's client in `exchange`'s job (None: a client of one process)."""
        self.exchange = exchange
        self.process_index, self.process_count = (exchange.rank, exchange.size) if exchange is not None else (0, 1)
        if exchange is not None:
            self._devices = [Device(i, self, device_kind=self.backend.name, process_index=i // exchange.local_devices)
                             for i in range(exchange.local_devices * exchange.size)]

    def devices(self) -> list[Device]:
        """Every device, in this process and (distributed) the others."""
        return list(self._devices)

    def local_devices(self) -> list[Device]:
        return [device for device in self._devices if device.process_index == self.process_index]

    def buffer_from_pyval(self, value, device: Device | None = None) -> Buffer:
        array = np.asarray(value, order="C")  # keeps a 0-d array 0-d, unlike ascontiguousarray
        if array is value:
            array = array.view()
        array.flags.writeable = False
        return Buffer(array, device or self._devices[0])

    def compile(self, program, options: CompileOptions = CompileOptions()) -> LoadedExecutable:
        """Compile StableHLO (text, bytecode, a portable artifact, or a path to one)."""
        if options.iree_flags and self.backend.name != "iree":
            raise MlirxlaError(f"iree_flags are for the iree backend; this client compiles with {self.backend.name}")
        data, source = program_bytes(program)
        key = fingerprint(hashlib.sha256(data).hexdigest(), options.key(), environment(self.backend))
        use_cache = self.cache is not None and options.dump_to is None
        if use_cache:
            entry = self.cache.load(key)
            if entry is not None:
                return self.loaded(Executable(entry.plan, entry.object_code), key)
        executable = compile_bytes(data, source, options, self.backend)
        if use_cache:
            self.cache.store(key, executable.plan, executable.object_code)
        return self.loaded(executable, key)

    def loaded(self, executable: Executable, key: str) -> LoadedExecutable:
        """The executable on this client's devices, which must be as many as its grid needs."""
        plan = executable.plan
        count = plan.replica_count * plan.partition_count
        if self.exchange is not None and count != len(self._devices):
            raise MlirxlaError(f"the program is for {count} devices; this client's {self.process_count} processes hold "
                               f"{len(self._devices)} (Client(device_count={count // self.process_count}, distributed=True) "
                               f"in each of {self.process_count} processes)")
        if count > len(self._devices):
            raise MlirxlaError(f"the program is for {plan.replica_count} replica(s) x {plan.partition_count} partition(s), "
                               f"{count} devices; this client has {len(self._devices)} (Client(device_count={count}))")
        return LoadedExecutable(executable, self, key)


def program_bytes(program) -> tuple[bytes, str]:
    if isinstance(program, bytes):
        return program, "<bytes>"
    if isinstance(program, str) and "\n" not in program and os.path.exists(program):
        try:
            with open(program, "rb") as stream:
                return stream.read(), program
        except OSError as error:
            raise MlirxlaError(f"cannot read {program}: {error.strerror}") from None
    if isinstance(program, str):
        return program.encode(), "<text>"
    raise MlirxlaError(f"cannot compile a {type(program).__name__}: pass StableHLO text, bytes or a path")


def compile_bytes(data: bytes, source: str, options: CompileOptions, backend: Backend) -> Executable:
    """Import and compile with `backend`, one compile at a time in the process: MLIR contexts
    of this toolkit are not safe to create and use from several threads at once (executions
    still run concurrently)."""
    from mlirxla import frontdoor
    from mlirxla.context import compile_context
    from mlirxla.dialects.xhlo.config import open_parameters
    from mlirxla.pipelines.runner import RunOptions

    run_options = RunOptions(dump_to=options.dump_to, dump_pass_re=options.dump_pass_re,
                             disable_passes=frozenset(options.disable_passes), backend=backend.name,
                             iree_flags=tuple(options.iree_flags), allow_excess_precision=options.allow_excess_precision,
                             flush_denormals=options.flush_denormals, render_reports=False)
    with _COMPILING, reported(options, source, backend) as recording, progress.compiling(source), compile_deadline.deadline(source):
        try:
            imported = frontdoor.import_bytes(data, source, compile_context(len(data)))
            with imported.module.context:
                open_parameters(imported.module, options.open_parameters)
            executable = Executable.of(backend.compile(imported.module, run_options))
        except MlirxlaError as error:
            raise error.with_source(source) from None
    if recording is not None:
        write_dumped_report(recording, executable)
    return executable


WHY_NO_XLA_FIGURE = "not computed inside the PJRT plugin (mlirxla-run --report on the program shows it)"


def reported(options: CompileOptions, source: str, backend: Backend):
    """With dumps asked for, a recording of the compile for its HTML report (`report/page.py`)."""
    if options.dump_to is None:
        return contextlib.nullcontext()
    from mlirxla.report.page import Recording
    from mlirxla.report.xla_memory import XlaFigure

    return Recording(source, backend.name, xla=XlaFigure(None, WHY_NO_XLA_FIGURE))


def write_dumped_report(recording, executable: Executable) -> None:
    """`module_NNNN.<name>.report.html` next to the module's other dump files. A report that
    cannot be made is said on stderr: it never fails the compile."""
    try:
        record = recording.record(executable)
        if record.runner is not None:
            record.runner.dumps.write("report.html", recording.html(executable))
    except Exception as error:  # the report is a help, not a reason for jax's compile to fail
        print(f"mlirxla: no report for {recording.source}: {type(error).__name__}: {error}", file=sys.stderr)


def environment(backend: Backend) -> str:
    """What else decides the compiled code: the backend, versions (of the sources themselves
    too), and what the backend says of its target."""
    return (f"mlirxla={Client.platform_version};{sources.fingerprint()};python={platform.python_version()}"
            f";backend={backend.name};{backend.environment()}")
