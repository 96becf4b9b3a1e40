"""A loaded executable: its plan (plain data: allocations, thunks, parameter and output specs,
the backend that compiled it) and its code, loaded by that backend (`backends/registry.py`);
`execute` runs it on numpy arrays (XLA's CpuExecutable).

Per execution: the address table is the parameters' own memory (C-contiguous arrays are
used in place, not copied), a temp slab (the kernels' scratch inside it: one a finished
execution left, else fresh; outputs never alias it), the constants (owned by the executable), and fresh output allocations; an output that fills its allocation
alone is allocated as the array it is returned as, others come back as views of their
allocation (or copies, for an output that is a parameter or a constant). A parameter that
holds a donated output (buffer assignment's donation) is written in place when the caller
donates it, and copied first when not, so an argument nobody donated never changes.
Everything that does not change between executions (the address template, output shapes)
is computed once. The plan round-trips through JSON (`to_json`/`from_json`), so that the
compile cache stores it without pickle.
"""

import base64
import ctypes
import math
from dataclasses import dataclass, field

import numpy as np

from mlirxla import phases
from mlirxla.dialects.xhlo.global_entry import GlobalValue
from mlirxla.errors import MlirxlaError

from . import blas, freed_memory, memory
from . import thunks as thunk_kinds
from .ctypes_arrays import address
from .executor import ThreadPool, plan_graph, run_thunks
from .native_drivers import NativeDriver
from .thunks import BufferSlice

TOKEN_TYPE = "!stablehlo.token"  # xhlo keeps StableHLO's token type
DEVICE_MEMORY = "device"  # the memory kind of an output that names none


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: str  # the numpy dtype name holding it
    element: str  # the MLIR element type

    def to_json(self) -> list:
        return [list(self.shape), self.dtype, self.element]

    @classmethod
    def from_json(cls, data: list) -> "TensorSpec":
        return cls(tuple(data[0]), data[1], data[2])

    def text(self) -> str:
        return f"{self.element}[{','.join(map(str, self.shape))}]"

    @classmethod
    def of(cls, value_type) -> "TensorSpec":
        """What a value of `value_type` is at an executable's boundary; a token (the ordering
        of side effects, as jax threads it through `main` for ordered effects) is an empty bool
        array, as jax passes it."""
        from mlirxla.mlir import ir

        from . import literals

        if not isinstance(value_type, ir.RankedTensorType):
            if str(value_type) == TOKEN_TYPE:
                return cls((0,), "bool", "token")
            raise MlirxlaError(f"mlirxla cannot pass a {value_type} across an executable's boundary")
        ranked = ir.RankedTensorType(value_type)
        return cls(tuple(ranked.shape), literals.storage_dtype(ranked.element_type).name, str(ranked.element_type))


@dataclass
class ExecutablePlan:
    parameters: list[TensorSpec]
    outputs: list[tuple[BufferSlice, TensorSpec]]
    allocation_sizes: list[int]
    allocation_kinds: list[str]  # parameter | temp | constant | output
    constants: dict[int, np.ndarray]  # allocation -> bytes (uint8)
    thunks: list = field(default_factory=list)
    backend: str = "cpu"  # whose code the thunks call (the registry's name)
    replica_count: int = 1  # the grid of devices the program is written for (each runs the plan)
    partition_count: int = 1
    # a partitioned program's entry as its caller sees it (`xhlo.global_entry`): per parameter
    # and output, the global shape and sharding; empty when no partitioner rewrote the entry
    global_parameters: list[GlobalValue] = field(default_factory=list)
    global_outputs: list[GlobalValue] = field(default_factory=list)
    driver: NativeDriver | None = None  # runs the whole thunk sequence when the backend compiled one
    # the parameters the caller donates (`tf.aliasing_output` / `jax.buffer_donor`): consumed by
    # an execution that is handed them as donated, whether or not an output took their memory
    donated_parameters: tuple[int, ...] = ()
    # per output, the memory kind the caller asked it in (`mhlo.memory_kind`: jax's host
    # offloading returns arrays in `pinned_host`); empty when every output is in `device`
    output_memory_kinds: tuple[str, ...] = ()

    def memory_kind_of_output(self, index: int) -> str:
        return self.output_memory_kinds[index] if self.output_memory_kinds else DEVICE_MEMORY

    def to_json(self) -> dict:
        return {
            "backend": self.backend,
            "parameters": [p.to_json() for p in self.parameters],
            "outputs": [[s.to_json(), spec.to_json()] for s, spec in self.outputs],
            "allocation_sizes": self.allocation_sizes,
            "allocation_kinds": self.allocation_kinds,
            "constants": {str(k): base64.b64encode(v.tobytes()).decode() for k, v in self.constants.items()},
            "thunks": [t.to_json() for t in self.thunks],
            "grid": [self.replica_count, self.partition_count],
            "global_entry": [[v.to_json() for v in self.global_parameters], [v.to_json() for v in self.global_outputs]],
        } | ({} if self.driver is None else {"driver": self.driver.to_json()}) | (
            {"donated": list(self.donated_parameters)} if self.donated_parameters else {}) | (
            {"memory_kinds": list(self.output_memory_kinds)} if self.output_memory_kinds else {})

    @classmethod
    def from_json(cls, data: dict) -> "ExecutablePlan":
        return cls(
            [TensorSpec.from_json(p) for p in data["parameters"]],
            [(BufferSlice.from_json(s), TensorSpec.from_json(spec)) for s, spec in data["outputs"]],
            list(data["allocation_sizes"]),
            list(data["allocation_kinds"]),
            {int(k): np.frombuffer(base64.b64decode(v), np.uint8).copy() for k, v in data["constants"].items()},
            [thunk_kinds.from_json(t) for t in data["thunks"]],
            data["backend"],
            # compile caches written before plans kept their grid hold single-device plans
            *(int(count) for count in data.get("grid", (1, 1))),
            *([GlobalValue.from_json(v) for v in values] for values in data.get("global_entry", ([], []))),
            NativeDriver.from_json(data.get("driver")),
            tuple(data.get("donated", ())),
            tuple(data.get("memory_kinds", ())),
        )

    def describe(self, decisions: list[str] = ()) -> str:
        lines = ["allocations:"]
        for index, (kind, size) in enumerate(zip(self.allocation_kinds, self.allocation_sizes)):
            lines.append(f"  #{index} {kind} {size} bytes")
        if self.driver is not None:
            lines.append(f"every thunk below runs in {self.driver.describe()}")
        lines.append("thunks:")
        for thunk in self.thunks:
            lines += ["  " + line for line in thunk.describe().splitlines()]
        lines.append("outputs: " + ", ".join(f"{spec.text()} at {s.text()}" for s, spec in self.outputs))
        if decisions:
            lines.append("decisions:")
            lines += [f"  {d}" for d in decisions]
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class OutputPlan:
    """How one output comes back: from `allocation` at `offset`, as `dtype` in `shape`; `whole`
    when it fills a fresh output allocation by itself (that array is then returned as is)."""

    allocation: int
    offset: int
    dtype: np.dtype
    shape: tuple[int, ...]
    count: int
    whole: bool


def written_parameters(plan: ExecutablePlan) -> frozenset[int]:
    """The parameters some thunk writes: those holding a donated output."""
    kinds = plan.allocation_kinds
    return frozenset(at.allocation for thunk in thunk_kinds.every_thunk(plan.thunks) if not isinstance(thunk, thunk_kinds.ControlFlow)
                     for at in thunk.writes if kinds[at.allocation] == "parameter")


def runs_in_order(plan: ExecutablePlan) -> bool:
    """Whether the executor runs the plan's thunks one after another (no dependency graph)."""
    return talks_to_devices(plan) or plan_graph(plan.thunks) is None


def calls_blas(plan: ExecutablePlan) -> bool:
    """Whether an execution runs numpy's OpenBLAS: a GEMM, or a kernel calling one."""
    return any(isinstance(thunk, thunk_kinds.GemmThunk) or getattr(thunk, "calls_blas", False)
               for thunk in thunk_kinds.every_thunk(plan.thunks))


# a LAPACK call on a matrix this large gains from its BLAS's threads (a 2048 x 2048 Cholesky:
# 27 ms on two, 37 on one); on smaller ones they cost more than they give (`blas._LAPACK_GATE`)
THREADED_LAPACK_FROM = 512 * 512


def small_lapack_calls(plan: ExecutablePlan) -> bool:
    """Whether the execution calls LAPACK on matrices that are all smaller than
    `THREADED_LAPACK_FROM` elements: scipy's OpenBLAS then runs on the calling thread."""
    sizes = [math.prod(shape[-2:]) for thunk in thunk_kinds.every_thunk(plan.thunks)
             if isinstance(thunk, thunk_kinds.HostThunk) and thunk.call == "lapack_ffi"
             for _, shape, _ in thunk.operands if len(shape) >= 2]
    return bool(sizes) and max(sizes) < THREADED_LAPACK_FROM


def talks_to_devices(plan: ExecutablePlan) -> bool:
    """Whether a thunk may meet the other devices: a collective, or on several partitions a
    Python callback (jax runs one of a jit over automatic shardings on one device, which hands
    its results to the others: `jax_plugin.once_where_jax_runs_it_once`). Every device must
    meet them in the same order, the program's."""
    return any(isinstance(thunk, thunk_kinds.CollectiveThunk)
               or (plan.partition_count > 1 and isinstance(thunk, thunk_kinds.HostThunk) and thunk.call == "python_callback")
               for thunk in thunk_kinds.every_thunk(plan.thunks))


def function_address(function) -> int:
    """The address of a ctypes function pointer's code."""
    return ctypes.cast(function, ctypes.c_void_p).value


# the temp slab an execution the PJRT plugin runs natively may take: it allocates it per call
# from the heap, which keeps the memory (`freed_memory`); larger slabs are reused by the
# Python path, and programs that large do not notice its microseconds
NATIVE_TEMP_BYTES = 1 << 20


def native_step(thunk) -> tuple | None:
    """A thunk as a step of `Executable.native_plan`, or None when it needs Python."""
    if type(thunk) is thunk_kinds.KernelThunk:
        scratch = [] if thunk.scratch is None else [(thunk.scratch.allocation, thunk.scratch.offset + offset)
                                                   for offset in thunk.scratch_offsets]
        places = [(s.allocation, s.offset) for s in thunk.arguments] + scratch
        return (function_address(thunk.function), tuple(a for a, _ in places), tuple(o for _, o in places), 0)
    if type(thunk) is thunk_kinds.CopyThunk:
        ends = (thunk.destination, thunk.source)
        return (0, tuple(s.allocation for s in ends), tuple(s.offset for s in ends), thunk.source.size)
    return None


class Executable:
    """Compiled once, executed many times."""

    def __init__(self, plan: ExecutablePlan, object_code: bytes, pool: ThreadPool | None = None):
        from mlirxla.backends import registry

        self.plan = plan
        self.object_code = object_code
        self.code = registry.backend(plan.backend).load_code(object_code)
        for thunk in plan.thunks:
            thunk.bind(self.code)
        if plan.driver is not None:
            plan.driver.bind(self.code, list(thunk_kinds.every_thunk(plan.thunks)))
        self.pool = pool or ThreadPool.shared()
        # collectives wait for other devices: their program runs in order on the device's thread,
        # so that no pool worker waits at a rendezvous for work queued behind it
        self.graph = None if talks_to_devices(plan) else plan_graph(plan.thunks)
        self.calls_blas = calls_blas(plan)
        self.small_lapack = small_lapack_calls(plan)
        self.one_blas_thread = blas.one_thread(self.calls_blas, self.small_lapack) if self.calls_blas or self.small_lapack else None
        self.constants = {index: np.ascontiguousarray(data) for index, data in plan.constants.items()}
        self.parameter_checks = [(np.dtype(p.dtype), tuple(p.shape)) for p in plan.parameters]
        self.outputs = [self.output_plan(at, spec) for at, spec in plan.outputs]
        typed = {o.allocation: o for o in self.outputs if o.whole}
        self.base_template = [0] * len(plan.allocation_kinds)
        for index, array in self.constants.items():
            self.base_template[index] = address(array)
        # allocations made fresh per execution: (index, bytes, or the output plan of an output
        # allocation returned whole, which is then allocated with its dtype and shape)
        self.written_parameters = written_parameters(plan)
        self.fresh = [(index, size, typed.get(index))
                      for index, (kind, size) in enumerate(zip(plan.allocation_kinds, plan.allocation_sizes))
                      if kind == "output" or (kind == "temp" and size > 0)]
        self.fresh_bytes = sum(size for _, size, _ in self.fresh)
        self.fresh_temps = [index for index, _, _ in self.fresh if plan.allocation_kinds[index] == "temp"]
        self.allocators = [(index, freed_memory.allocator(typed.shape, typed.dtype) if typed else freed_memory.allocator((size,), np.uint8))
                           for index, size, typed in self.fresh]
        freed_memory.keep_for(self.fresh_bytes)
        # temp slabs of finished executions, by allocation: the next execution reuses one, so
        # a slab above malloc's largest heap block (32 MiB, which it maps fresh from the
        # kernel) does not page-fault on every call; one per execution running at once
        self.spare_temps: list[dict[int, np.ndarray]] = []
        self.output_allocations = [o.allocation for o in self.outputs]
        self.straight = self.runs_straight()
        makers = dict(self.allocators)
        self.output_makers = [makers[index] for index in self.output_allocations] if self.outputs_alone() else []
        phases.publish("executable", self)

    @classmethod
    def of(cls, program) -> "Executable":
        """The executable of a backend's `CompiledProgram`."""
        return cls(program.plan, program.object_code)

    def output_plan(self, at: BufferSlice, spec: TensorSpec) -> OutputPlan:
        count = int(np.prod(spec.shape, dtype=np.int64))
        dtype = np.dtype(spec.dtype)
        kind = self.plan.allocation_kinds[at.allocation]
        holders = sum(1 for other, _ in self.plan.outputs if other.allocation == at.allocation)
        whole = (kind == "output" and holders == 1 and at.offset == 0
                 and count * dtype.itemsize == self.plan.allocation_sizes[at.allocation])
        return OutputPlan(at.allocation, at.offset, dtype, tuple(spec.shape), count, whole)

    def check_arguments(self, arguments) -> list[np.ndarray]:
        checks = self.parameter_checks
        if len(arguments) != len(checks):
            raise MlirxlaError(f"the executable takes {len(checks)} argument(s), got {len(arguments)}")
        arrays = []
        for index, (argument, (dtype, shape)) in enumerate(zip(arguments, checks)):
            array = argument if type(argument) is np.ndarray else np.asarray(argument)
            if array.dtype != dtype:
                spec = self.plan.parameters[index]
                raise MlirxlaError(f"argument {index}: expected dtype {dtype} ({spec.text()}), got {array.dtype}")
            if array.shape != shape:
                spec = self.plan.parameters[index]
                raise MlirxlaError(f"argument {index}: expected shape {shape} ({spec.text()}), got {array.shape}")
            arrays.append(array if array.flags.c_contiguous else np.ascontiguousarray(array))
        return arrays

    def outputs_alone(self) -> bool:
        """Whether an execution writes only fresh arrays, one per output returned whole: no
        parameter written, no BLAS threads to hold back and no memory check (small outputs)."""
        fresh_outputs = sorted(index for index, _, _ in self.fresh if index not in self.fresh_temps)
        return (not self.written_parameters and self.one_blas_thread is None
                and self.fresh_bytes <= memory.ALWAYS_AFFORDABLE_BYTES
                and all(o.whole for o in self.outputs) and sorted(self.output_allocations) == fresh_outputs)

    def runs_straight(self) -> bool:
        """Whether an execution needs nothing but its parameters and an array per output
        (`outputs_alone`, and no temp slab). Such an execution (a jitted op on small arrays,
        the most frequent call of all: jax dispatches each op of eager code as one) skips the
        bookkeeping of the general path, which took half of its 4 us in the plugin."""
        return self.outputs_alone() and not self.fresh_temps

    def native_plan(self) -> tuple | None:
        """What a native caller (the PJRT plugin) needs to run an execution with no Python
        between its buffers and the code: (the address table with the constants in it, the
        output allocations and a function making each output's array, the temp allocations
        and their bytes, the driver as (function, imports table) or None, and without a
        driver the steps in order, each (function, allocations, offsets, 0) for a kernel
        called on those addresses (its scratch arguments after them), or (0, (destination,
        source) allocations, their offsets, bytes) for a copy). None when an execution needs
        Python: its outputs are not alone (`outputs_alone`), its temps pass
        `NATIVE_TEMP_BYTES`, a thunk is neither a plain kernel nor a copy, the thunks run as a
        graph, or the driver calls back."""
        sizes = self.plan.allocation_sizes
        if not self.outputs_alone() or sum(sizes[index] for index in self.fresh_temps) > NATIVE_TEMP_BYTES:
            return None
        head = (tuple(self.base_template), tuple(self.output_allocations), tuple(self.output_makers),
                tuple((index, sizes[index]) for index in self.fresh_temps))
        driver = self.plan.driver
        if driver is not None:
            native = not driver.called_back
            return head + ((function_address(driver.function), ctypes.addressof(driver.imported)), ()) if native else None
        steps = [native_step(thunk) for thunk in self.plan.thunks]
        return None if self.graph is not None or None in steps else head + (None, tuple(steps))

    def execute_checked(self, arrays: list[np.ndarray], addresses: list[int], donated: frozenset = frozenset()) -> list[np.ndarray]:
        """`execute` on arguments the caller has checked: C-contiguous arrays of the parameters'
        dtypes and shapes whose first bytes are at `addresses` (the PJRT plugin checks its
        buffers against the parameters in C)."""
        if not self.straight:
            return self.execute(arrays, donated, addresses)
        bases = self.base_template.copy()
        bases[: len(addresses)] = addresses
        outputs = [make() for make in self.output_makers]
        for index, array in zip(self.output_allocations, outputs):
            bases[index] = address(array)
        run_thunks(self.plan.thunks, bases, self.pool, self.graph, self.plan.driver)
        return outputs

    def execute(self, arguments, donated: frozenset = frozenset(), addresses: list[int] | None = None) -> list[np.ndarray]:
        """Run on numpy arrays. A parameter that holds an output is written in place when it is
        `donated` (and writable), else in a private copy: the caller's array stays as it was.
        `addresses`, when the caller knows them (the PJRT plugin does), are the arguments'
        first bytes: numpy takes microseconds to tell the address of a read-only array."""
        arrays = self.check_arguments(arguments)
        if self.straight:
            return self.execute_checked(arrays, [addresses[index] if addresses is not None and array is arguments[index] else address(array)
                                                 for index, array in enumerate(arrays)])
        for index in self.written_parameters:
            if index not in donated or not arrays[index].flags.writeable or arrays[index] is not arguments[index]:
                arrays[index] = arrays[index].copy()
        bases = self.base_template.copy()
        for index, array in enumerate(arrays):
            bases[index] = addresses[index] if addresses is not None and array is arguments[index] else address(array)
        storage = self.allocate()
        for index, array in storage.items():
            bases[index] = address(array)
        try:
            if self.one_blas_thread is not None:
                with self.one_blas_thread:
                    run_thunks(self.plan.thunks, bases, self.pool, self.graph, self.plan.driver)
            else:
                run_thunks(self.plan.thunks, bases, self.pool, self.graph, self.plan.driver)
            return [storage[o.allocation] if o.whole else self.output(o, storage, arrays, donated) for o in self.outputs]
        finally:  # outputs read from temps are copies: the slab is free again
            self.spare_temps.append({index: storage[index] for index in self.fresh_temps})

    def allocate(self) -> dict[int, np.ndarray]:
        """The memory of one execution: fresh outputs, and a temp slab a finished execution
        left or a fresh one, by allocation."""
        try:
            storage = self.spare_temps.pop()
        except IndexError:
            storage = {}
        if self.fresh_bytes > memory.ALWAYS_AFFORDABLE_BYTES:  # spares small executions the words
            memory.require(self.fresh_bytes - sum(array.nbytes for array in storage.values()), "one execution", self.largest_allocation())
        try:
            for index, make in self.allocators:
                if index not in storage:
                    storage[index] = make()
            return storage
        except MemoryError:
            raise memory.exhausted(self.fresh_bytes, "one execution", self.largest_allocation()) from None

    def largest_allocation(self) -> str:
        """What most of an execution's memory goes to, as a parenthesis for the size."""
        index, size, _ = max(self.fresh, key=lambda fresh: fresh[1])
        kind = self.plan.allocation_kinds[index]
        held = [spec.text() for at, spec in self.plan.outputs if at.allocation == index]
        largest = f"the output {held[0]}" if kind == "output" and len(held) == 1 else f"its {kind} allocation #{index}"
        return f" ({largest} alone {memory.human(size)})"

    def output(self, o: OutputPlan, storage: dict, arrays: list, donated: frozenset) -> np.ndarray:
        """An output that is not its allocation whole (those `execute` hands out as they are)."""
        kind = self.plan.allocation_kinds[o.allocation]
        if kind == "output":
            return np.frombuffer(storage[o.allocation], o.dtype, o.count, o.offset).reshape(o.shape)
        # a donated argument returned as it is hands its array over, unless that array is a
        # read-only view of the caller's memory (the PJRT plugin's zero-copy host buffers,
        # whose memory the caller frees once the donated buffer is gone)
        if kind == "parameter" and (o.allocation in self.written_parameters
                                    or (o.allocation in donated and arrays[o.allocation].flags.writeable)):
            return arrays[o.allocation]
        source = arrays[o.allocation] if kind == "parameter" else (self.constants[o.allocation] if kind == "constant" else storage[o.allocation])
        return np.frombuffer(source.reshape(-1).view(np.uint8), o.dtype, o.count, o.offset).reshape(o.shape).copy()
