"""Thunks: the steps an executable runs, each over slices of its buffers (XLA:CPU's thunks).

An execution owns a table of base addresses, one per allocation (the parameters, the temp
slab, the constants, the outputs). A `BufferSlice` names an allocation, an offset and a size;
every thunk declares the slices it reads and writes (`reads`, `writes`), which is all the
executor needs to order them. Kinds:

- `kernel`: a native function `void k(ptr, ...)` over its operands, its results, then its
  scratch arguments (working memory in the temp slab, one range per concurrent call, which
  the thunk declares it writes) when it needs any;
- `sliced_kernel`: a kernel that computes one slice of dimension 0 (an image of a
  batch-slice fusion, a block of rows of a large kernel, a block of a convolution's images
  as im2col + GEMM), called once per slice with the sliced pointers moved along, slices
  spread over the thread pool;
- `gemm`: a BLAS GEMM (row-major, optionally transposed operands, a batch of them);
- `copy`: a memmove between slices; `parallel_copy`: copies that read all their sources
  before writing (a loop's carried values swapped or rotated);
- `host`: a library call computed with numpy on views of the buffers (sort, FFT,
  triangular solve, scatter), or a kernel the reference interpreter evaluates
  (`host_calls.py`);
- `collective`: a collective, send/recv, infeed/outfeed or the device's own id, computed
  with numpy from what the devices of its group bring to the rendezvous (`collectives.py`);
- `function`: a function of the loaded code called on host arrays, the whole program
  compiled elsewhere (an IREE module's entry): the code hands it out by name;
- `while`: the condition's thunks, a predicate read back, the body's thunks, repeated (the
  body alone, `trip_count` times, when the compiler proved the count);
- `conditional`: an index (or predicate) read back, then one branch's thunks.

A `while` or `conditional` the backend compiled a native driver for (`native_drivers.py`) runs
as that one compiled function, which calls back into Python only for the thunks inside it
cannot run itself; without one, it walks its thunks from Python.

Thunks are plain data (`to_json`/`from_json`), bound to the loaded code by `bind(engine)`, so an
executable's thunk sequence can be dumped and cached without pickle.
"""

import ctypes
import math
import operator
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from mlirxla.errors import MlirxlaError

from . import blas, collectives, host_calls, native_pool
from .ctypes_arrays import array_at, bytes_at, int64_table
from .native_drivers import NativeDriver


@dataclass(frozen=True)
class BufferSlice:
    allocation: int
    offset: int
    size: int

    def to_json(self) -> list:
        return [self.allocation, self.offset, self.size]

    @classmethod
    def from_json(cls, data: list) -> "BufferSlice":
        return cls(*data)

    def text(self) -> str:
        return f"#{self.allocation}[{self.offset}:{self.offset + self.size}]"


def _slices(data) -> tuple[BufferSlice, ...]:
    return tuple(BufferSlice.from_json(d) for d in data)


def argument_addresses(arguments: tuple[BufferSlice, ...]):
    """A function of an execution's address table giving the addresses of `arguments`: where
    all start their allocations (the common case), one `itemgetter` call, which halves the
    Python cost of a small kernel's call."""
    if len(arguments) >= 2 and not any(s.offset for s in arguments):
        return operator.itemgetter(*(s.allocation for s in arguments))
    return lambda bases: [bases[s.allocation] + s.offset for s in arguments]


@dataclass
class KernelThunk:
    name: str
    symbol: str
    arguments: tuple[BufferSlice, ...]  # operands, then results
    result_count: int
    kind: str = "kernel"
    scratch: BufferSlice | None = None  # one call's working memory
    scratch_offsets: tuple[int, ...] = ()  # where each scratch argument (after the results) points in it
    scratch_parts: int = 1  # concurrent calls at most, each with a range of its own after `scratch`
    function: object = field(default=None, repr=False, compare=False)
    addresses: object = field(default=None, repr=False, compare=False)  # bases -> the arguments' addresses

    @property
    def reads(self):
        return self.arguments[: len(self.arguments) - self.result_count]

    @property
    def results(self):
        return self.arguments[len(self.arguments) - self.result_count:]

    @property
    def writes(self):
        """The results and, in the slab where other values live at other times, the scratch."""
        if self.scratch is None:
            return self.results
        whole = BufferSlice(self.scratch.allocation, self.scratch.offset, self.scratch.size * self.scratch_parts)
        return self.results + (whole,)

    def bind(self, engine) -> None:
        count = len(self.arguments) + len(self.scratch_offsets)
        prototype = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * count))
        self.function = prototype(engine.address(self.symbol))
        self.addresses = argument_addresses(self.arguments)

    def scratch_arguments(self, bases: list[int], part: int = 0) -> list[int]:
        """The scratch arguments of the `part`th concurrent call ([] without scratch): each
        call has a range of its own, `scratch.size` bytes apart."""
        if self.scratch is None:
            return []
        start = bases[self.scratch.allocation] + self.scratch.offset + part * self.scratch.size
        return [start + offset for offset in self.scratch_offsets]

    def run(self, bases: list[int], pool) -> None:
        self.function(*self.addresses(bases), *self.scratch_arguments(bases))

    def to_json(self) -> dict:
        data = {"kind": self.kind, "name": self.name, "symbol": self.symbol,
                "arguments": [s.to_json() for s in self.arguments], "result_count": self.result_count}
        if self.scratch is not None:
            data["scratch"] = self.scratch.to_json()
            data["scratch_offsets"] = list(self.scratch_offsets)
            data["scratch_parts"] = self.scratch_parts
        return data

    def describe(self) -> str:
        operands = ", ".join(s.text() for s in self.reads)
        results = ", ".join(s.text() for s in self.results)
        parts = f" x{self.scratch_parts} concurrent calls" if self.scratch_parts > 1 else ""
        scratch = f" scratch {self.scratch.text()} per call{parts}" if self.scratch is not None else ""
        return f"kernel {self.name} [{self.symbol}]({operands}) -> {results}{scratch}"


@dataclass
class SlicedKernelThunk(KernelThunk):
    slices: int = 1
    strides: tuple[int, ...] = ()  # bytes to move each argument's pointer per slice (0: read whole)
    # the kernel calls BLAS itself (a convolution's blocks of im2col + GEMM), which must then
    # run single-threaded, each slice's GEMM on its slice's thread
    calls_blas: bool = False
    kind: str = "sliced_kernel"
    address: int = field(default=0, repr=False, compare=False)

    def bind(self, engine) -> None:
        self.address = engine.address(self.symbol)

    def run(self, bases: list[int], pool) -> None:
        """The slices on the native pool (`native_pool.py`), each call with its slice's
        pointers and its thread's scratch; on the calling thread alone without a pool (a
        device of a grid as wide as the machine)."""
        scratch = self.scratch_arguments(bases)
        arguments = [(bases[s.allocation] + s.offset, stride, 0) for s, stride in zip(self.arguments, self.strides)]
        arguments += [(start, 0, self.scratch.size) for start in scratch]
        parts = 1 if pool is None else min(pool.workers, self.scratch_parts if scratch else self.slices)
        context = int64_table([self.address, *(word for argument in arguments for word in argument)])
        threads = native_pool.shared()
        threads.run(threads.slices_function(len(arguments)), ctypes.addressof(context), self.slices, parts)

    def to_json(self) -> dict:
        return super().to_json() | {"slices": self.slices, "strides": list(self.strides), "calls_blas": self.calls_blas}

    def describe(self) -> str:
        return super().describe().replace("kernel ", f"sliced kernel x{self.slices} ", 1)


# GEMM element types BLAS has no routine for: computed by the f32 GEMM on operands widened
# to f32, accumulating in f32 and rounding once to the result type, as XLA:CPU does
WIDENED_GEMMS = {"bf16": (ml_dtypes.bfloat16, ml_dtypes.bfloat16), "bf16 to f32": (ml_dtypes.bfloat16, np.float32)}


@dataclass
class GemmThunk:
    """out[b] = op(lhs[b]) @ op(rhs[b]) for b < batch, row-major, in place."""

    name: str
    element: str  # f32 | f64 | bf16 | "bf16 to f32" (WIDENED_GEMMS)
    lhs: BufferSlice
    rhs: BufferSlice
    out: BufferSlice
    m: int
    n: int
    k: int
    transpose_lhs: bool
    transpose_rhs: bool
    batch: int = 1
    # in parts over the native pool (`native_pool.pooled_gemm`), else whole on the calling
    # thread: the compiler's decision for the program (`compiler.gemms_in_parts`)
    in_parts: bool = False
    kind: str = "gemm"
    function: object = field(default=None, repr=False, compare=False)
    batched: object = field(default=None, repr=False, compare=False)  # a batch in parts: one call for all of it

    @property
    def reads(self):
        return (self.lhs, self.rhs)

    @property
    def writes(self):
        return (self.out,)

    def bind(self, engine) -> None:
        element = "f32" if self.element in WIDENED_GEMMS else self.element
        self.function = native_pool.pooled_gemm(element) if self.in_parts else blas.gemm(element)
        self.batched = native_pool.pooled_gemm_batch(element) if self.in_parts and self.batch > 1 else None

    def run(self, bases: list[int], pool) -> None:
        a, b, c = (bases[s.allocation] + s.offset for s in (self.lhs, self.rhs, self.out))
        if self.element in WIDENED_GEMMS:
            self.run_widened(a, b, c)
        else:
            self.run_blas(a, b, c, 4 if self.element == "f32" else 8)

    def run_widened(self, a: int, b: int, c: int) -> None:
        operand, result = WIDENED_GEMMS[self.element]
        sizes = (self.batch * self.m * self.k, self.batch * self.k * self.n, self.batch * self.m * self.n)
        lhs, rhs = (array_at(address, size, operand).astype(np.float32) for address, size in zip((a, b), sizes))
        out = np.empty(sizes[2], np.float32)
        self.run_blas(lhs.ctypes.data, rhs.ctypes.data, out.ctypes.data, 4)
        array_at(c, sizes[2], result)[...] = out.astype(result, copy=False)

    def run_blas(self, a: int, b: int, c: int, width: int) -> None:
        lda = self.m if self.transpose_lhs else self.k
        ldb = self.k if self.transpose_rhs else self.n
        ta = blas.TRANSPOSE if self.transpose_lhs else blas.NO_TRANSPOSE
        tb = blas.TRANSPOSE if self.transpose_rhs else blas.NO_TRANSPOSE
        if self.batched is not None:
            self.batched(ta, tb, self.m, self.n, self.k, a, lda, b, ldb, c, self.n, self.batch, self.m * self.k,
                         self.k * self.n, self.m * self.n)
            return
        for index in range(self.batch):
            self.function(blas.ROW_MAJOR, ta, tb, self.m, self.n, self.k, 1.0,
                          a + index * self.m * self.k * width, lda, b + index * self.k * self.n * width, ldb,
                          0.0, c + index * self.m * self.n * width, self.n)

    def to_json(self) -> dict:
        return {"kind": self.kind, "name": self.name, "element": self.element, "lhs": self.lhs.to_json(),
                "rhs": self.rhs.to_json(), "out": self.out.to_json(), "m": self.m, "n": self.n, "k": self.k,
                "transpose_lhs": self.transpose_lhs, "transpose_rhs": self.transpose_rhs, "batch": self.batch,
                "in_parts": self.in_parts}

    def describe(self) -> str:
        shape = f"{self.batch}x" if self.batch > 1 else ""
        flags = ("T" if self.transpose_lhs else "N") + ("T" if self.transpose_rhs else "N")
        parts = " in parts" if self.in_parts else ""
        return (f"gemm {self.name} {self.element} {shape}{self.m}x{self.n}x{self.k} {flags}{parts} "
                f"({self.lhs.text()}, {self.rhs.text()}) -> {self.out.text()}")


@dataclass
class CopyThunk:
    name: str
    source: BufferSlice
    destination: BufferSlice
    kind: str = "copy"

    @property
    def reads(self):
        return (self.source,)

    @property
    def writes(self):
        return (self.destination,)

    def bind(self, engine) -> None:
        pass

    def run(self, bases: list[int], pool) -> None:
        ctypes.memmove(bases[self.destination.allocation] + self.destination.offset,
                       bases[self.source.allocation] + self.source.offset, self.source.size)

    def to_json(self) -> dict:
        return {"kind": self.kind, "name": self.name, "source": self.source.to_json(), "destination": self.destination.to_json()}

    def describe(self) -> str:
        return f"copy {self.name} {self.source.text()} -> {self.destination.text()}"


@dataclass
class ParallelCopyThunk:
    """Copies that take effect together: every source is read before any destination is
    written (a while body returning its carried values rotated or swapped)."""

    name: str
    copies: tuple[CopyThunk, ...]
    kind: str = "parallel_copy"

    @property
    def reads(self):
        return tuple(c.source for c in self.copies)

    @property
    def writes(self):
        return tuple(c.destination for c in self.copies)

    def bind(self, engine) -> None:
        pass

    def run(self, bases: list[int], pool) -> None:
        saved = [ctypes.string_at(bases[c.source.allocation] + c.source.offset, c.source.size) for c in self.copies]
        for copy, data in zip(self.copies, saved):
            ctypes.memmove(bases[copy.destination.allocation] + copy.destination.offset, data, len(data))

    def to_json(self) -> dict:
        return {"kind": self.kind, "name": self.name, "copies": [c.to_json() for c in self.copies]}

    def describe(self) -> str:
        return f"parallel copy {self.name}: " + ", ".join(f"{c.source.text()} -> {c.destination.text()}" for c in self.copies)


class ArraysOnSlices:
    """What host-side thunks share: operands and results as (slice, shape, dtype), read and
    written as numpy views of the buffers."""

    @property
    def reads(self):
        return tuple(s for s, _, _ in self.operands)

    @property
    def writes(self):
        return tuple(s for s, _, _ in self.results)

    @staticmethod
    def view(bases: list[int], at: BufferSlice, shape, dtype) -> np.ndarray:
        memory = bytes_at(bases[at.allocation] + at.offset, at.size)
        return np.frombuffer(memory, np.dtype(dtype), count=math.prod(shape)).reshape(shape)

    def slices_text(self) -> str:
        return f"({', '.join(s.text() for s in self.reads)}) -> {', '.join(s.text() for s in self.writes)}"


@dataclass
class HostThunk(ArraysOnSlices):
    """A library call computed on the host with numpy (`host_calls.py`): sort, FFT,
    triangular solve, scatter. Operands and results are (slice, shape, dtype); where the
    attributes give `operand_orders` / `result_orders` (a custom call's column-major
    layouts), a buffer holds its tensor's dimensions in that order and the call sees it with
    the logical shape."""

    name: str
    call: str
    operands: tuple
    results: tuple
    attributes: dict
    kind: str = "host"
    calls = host_calls.CALLS

    def bind(self, engine) -> None:
        pass

    def run(self, bases: list[int], pool) -> None:
        operand_orders = self.attributes.get("operand_orders") or [None] * len(self.operands)
        operands = [logical_view(self.view(bases, *spec), order) for spec, order in zip(self.operands, operand_orders)]
        values = self.calls[self.call](operands, self.attributes)
        result_orders = self.attributes.get("result_orders") or [None] * len(self.results)
        for (at, shape, dtype), value, order in zip(self.results, values, result_orders):
            value = np.asarray(value)
            target = logical_view(self.view(bases, at, shape, dtype), order)
            # a call may compute only a leading block of a result, the part the program reads (a partial sort)
            block = tuple(slice(0, extent) for extent in value.shape) if value.shape != target.shape else ...
            target[block] = value.astype(dtype, copy=False)

    def to_json(self) -> dict:
        return {"kind": self.kind, "name": self.name, "call": self.call, "operands": _specs_json(self.operands),
                "results": _specs_json(self.results), "attributes": self.attributes}

    def describe(self) -> str:
        return f"{self.kind} {self.call} {self.name} {self.attributes} {self.slices_text()}"


@dataclass
class CollectiveThunk(HostThunk):
    """A host call that talks to the other devices of the execution (`collectives.py`); an
    executable holding one runs its thunks in program order, on its device's thread."""

    kind: str = "collective"
    calls = collectives.CALLS


@dataclass
class FunctionThunk(ArraysOnSlices):
    """A function of the loaded code (`engine.function(name)`: numpy arrays in, arrays out),
    called on views of its operands, its results written into its result slices: a program
    another compiler made whole (the iree backend's module). Operands and results are
    (slice, shape, dtype), as for host calls; `attributes` are plain data that describe it
    (an IREE module's dispatches), never read to run it."""

    name: str
    function_name: str
    operands: tuple
    results: tuple
    attributes: dict
    kind: str = "function"
    function: object = field(default=None, repr=False, compare=False)

    def bind(self, engine) -> None:
        self.function = engine.function(self.function_name)

    def run(self, bases: list[int], pool) -> None:
        values = self.function([self.view(bases, *spec) for spec in self.operands])
        for (at, shape, dtype), value in zip(self.results, values):
            self.view(bases, at, shape, dtype)[...] = value

    def to_json(self) -> dict:
        return {"kind": self.kind, "name": self.name, "function_name": self.function_name, "operands": _specs_json(self.operands),
                "results": _specs_json(self.results), "attributes": self.attributes}

    def describe(self) -> str:
        return f"function {self.name} {self.attributes} {self.slices_text()}"


def logical_view(buffer: np.ndarray, order: list[int] | None) -> np.ndarray:
    """A buffer holding a tensor's logical dimensions in `order` (major to minor), seen with
    the logical shape; the buffer itself where `order` is None."""
    return buffer if order is None else buffer.transpose(sorted(range(len(order)), key=order.__getitem__))


def _specs_json(specs) -> list:
    return [[s.to_json(), list(shape), dtype] for s, shape, dtype in specs]


def _specs(data) -> tuple:
    return tuple((BufferSlice.from_json(s), tuple(shape), dtype) for s, shape, dtype in data)


def _read_scalar(bases: list[int], at: BufferSlice) -> int:
    address = bases[at.allocation] + at.offset
    if at.size == 1:
        return ctypes.c_uint8.from_address(address).value
    if at.size == 4:
        return ctypes.c_int32.from_address(address).value
    return ctypes.c_int64.from_address(address).value


class ControlFlow:
    """A thunk holding thunks: it declares everything it and they touch as read and written.
    The nested thunks' slices are read when asked, not copied at construction: the backend
    places kernel scratch after the thunks exist, and a copy taken earlier would miss it
    (the executor would then run a loop beside a kernel whose scratch its body overwrites)."""

    @property
    def reads(self):
        slices = list(self.reads_and_writes)
        for thunk in self.nested():
            slices.extend(thunk.reads)
            slices.extend(thunk.writes)
        return tuple(dict.fromkeys(slices))

    @property
    def writes(self):
        return self.reads


def every_thunk(thunks: list):
    """The thunks and, depth first, the thunks inside loops and conditionals."""
    for thunk in thunks:
        yield thunk
        if isinstance(thunk, WhileThunk):
            yield from every_thunk(thunk.condition + thunk.body)
        elif isinstance(thunk, ConditionalThunk):
            for branch in thunk.branches:
                yield from every_thunk(branch)


def bind_driver(thunk, engine) -> None:
    if thunk.driver is not None:
        thunk.driver.bind(engine, list(every_thunk([thunk])))


def driver_json(thunk) -> dict:
    return {} if thunk.driver is None else {"driver": thunk.driver.to_json()}


def driver_text(thunk) -> str:
    return "" if thunk.driver is None else f" in {thunk.driver.describe()}"


def indented(thunks: list) -> list[str]:
    return ["    " + line for t in thunks for line in t.describe().splitlines()]


@dataclass
class WhileThunk(ControlFlow):
    name: str
    condition: list
    predicate: BufferSlice
    body: list
    reads_and_writes: tuple[BufferSlice, ...] = ()  # its operands, results and predicate
    kind: str = "while"
    driver: NativeDriver | None = None
    trip_count: int | None = None  # known at compile time: the condition need not run

    def nested(self) -> list:
        return self.condition + self.body

    def bind(self, engine) -> None:
        for thunk in self.condition + self.body:
            thunk.bind(engine)
        bind_driver(self, engine)

    def run(self, bases: list[int], pool) -> None:
        if self.driver is not None and _observer is None:
            self.driver.run(bases, pool)
            return
        if self.trip_count is not None:
            for _ in range(self.trip_count):
                run_sequence(self.body, bases, pool)
            return
        while True:
            run_sequence(self.condition, bases, pool)
            if not _read_scalar(bases, self.predicate):
                return
            run_sequence(self.body, bases, pool)

    def to_json(self) -> dict:
        return {"kind": self.kind, "name": self.name, "condition": [t.to_json() for t in self.condition],
                "predicate": self.predicate.to_json(), "body": [t.to_json() for t in self.body],
                "reads_and_writes": [s.to_json() for s in self.reads_and_writes], "trip_count": self.trip_count} | driver_json(self)

    def describe(self) -> str:
        known = f", trip count {self.trip_count}" if self.trip_count is not None else ""
        lines = [f"while {self.name} (predicate {self.predicate.text()}{known}){driver_text(self)}", "  condition:"]
        lines += indented(self.condition)
        lines.append("  body:")
        lines += indented(self.body)
        return "\n".join(lines)


@dataclass
class ConditionalThunk(ControlFlow):
    name: str
    selector: BufferSlice
    is_predicate: bool
    branches: list  # lists of thunks; a predicate picks branch 0 when true
    reads_and_writes: tuple[BufferSlice, ...] = ()  # its operands, results and selector
    kind: str = "conditional"
    driver: NativeDriver | None = None

    def nested(self) -> list:
        return [thunk for branch in self.branches for thunk in branch]

    def bind(self, engine) -> None:
        for branch in self.branches:
            for thunk in branch:
                thunk.bind(engine)
        bind_driver(self, engine)

    def run(self, bases: list[int], pool) -> None:
        if self.driver is not None and _observer is None:
            self.driver.run(bases, pool)
            return
        value = _read_scalar(bases, self.selector)
        if self.is_predicate:
            index = 0 if value else 1
        else:
            index = value if 0 <= value < len(self.branches) else len(self.branches) - 1
        run_sequence(self.branches[index], bases, pool)

    def to_json(self) -> dict:
        return {"kind": self.kind, "name": self.name, "selector": self.selector.to_json(), "is_predicate": self.is_predicate,
                "branches": [[t.to_json() for t in branch] for branch in self.branches],
                "reads_and_writes": [s.to_json() for s in self.reads_and_writes]} | driver_json(self)

    def describe(self) -> str:
        lines = [f"conditional {self.name} (selector {self.selector.text()}){driver_text(self)}"]
        for index, branch in enumerate(self.branches):
            lines.append(f"  branch {index}:")
            lines += indented(branch)
        return "\n".join(lines)


# What times every thunk while a profile records (`report/profile.py`): an object with
# `run(thunk, bases, pool)` and `execution(thunks, run)`. None, the common case, costs one test
# per sequence run.
_observer = None


def observe(observer) -> None:
    """Run every thunk through `observer` from now on (None: run them plainly again). The PJRT
    plugin reads `_observer` before it runs an execution natively, and walks it here instead
    while one is set."""
    global _observer
    _observer = observer


def observer():
    return _observer


def run_sequence(thunks: list, bases: list[int], pool) -> None:
    observing = _observer
    if observing is None:
        for thunk in thunks:
            thunk.run(bases, pool)
    else:
        for thunk in thunks:
            observing.run(thunk, bases, pool)


def from_json(data: dict):
    kind = data["kind"]
    scratch = {"scratch": BufferSlice.from_json(data["scratch"]), "scratch_offsets": tuple(data["scratch_offsets"]),
               "scratch_parts": data["scratch_parts"]} if "scratch" in data else {}
    if kind == "kernel":
        return KernelThunk(data["name"], data["symbol"], _slices(data["arguments"]), data["result_count"], **scratch)
    if kind == "sliced_kernel":
        return SlicedKernelThunk(data["name"], data["symbol"], _slices(data["arguments"]), data["result_count"],
                                 slices=data["slices"], strides=tuple(data["strides"]), calls_blas=data.get("calls_blas", False),
                                 **scratch)
    if kind == "gemm":
        return GemmThunk(data["name"], data["element"], BufferSlice.from_json(data["lhs"]), BufferSlice.from_json(data["rhs"]),
                         BufferSlice.from_json(data["out"]), data["m"], data["n"], data["k"], data["transpose_lhs"],
                         data["transpose_rhs"], data["batch"], data.get("in_parts", False))
    if kind == "copy":
        return CopyThunk(data["name"], BufferSlice.from_json(data["source"]), BufferSlice.from_json(data["destination"]))
    if kind == "host":
        return HostThunk(data["name"], data["call"], _specs(data["operands"]), _specs(data["results"]), data["attributes"])
    if kind == "collective":
        return CollectiveThunk(data["name"], data["call"], _specs(data["operands"]), _specs(data["results"]), data["attributes"])
    if kind == "function":
        return FunctionThunk(data["name"], data["function_name"], _specs(data["operands"]), _specs(data["results"]), data["attributes"])
    if kind == "parallel_copy":
        return ParallelCopyThunk(data["name"], tuple(from_json(c) for c in data["copies"]))
    if kind == "while":
        return WhileThunk(data["name"], [from_json(t) for t in data["condition"]], BufferSlice.from_json(data["predicate"]),
                          [from_json(t) for t in data["body"]], _slices(data["reads_and_writes"]),
                          driver=NativeDriver.from_json(data.get("driver")), trip_count=data.get("trip_count"))
    if kind == "conditional":
        return ConditionalThunk(data["name"], BufferSlice.from_json(data["selector"]), data["is_predicate"],
                                [[from_json(t) for t in branch] for branch in data["branches"]], _slices(data["reads_and_writes"]),
                                driver=NativeDriver.from_json(data.get("driver")))
    raise MlirxlaError(f"unknown thunk kind '{kind}'")
