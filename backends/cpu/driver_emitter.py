"""Native drivers: an executable's thunk sequence, or each of its top-level `while` and
`conditional` thunks, as one LLVM function that runs the thunks, loops and branches
(`runtime/native_drivers.py` runs it). Why: walking thunks from Python costs a round trip per
thunk (per iteration, in a loop: a 64-step scan of small kernels spent most of its time
there); in a driver an iteration costs its kernels.

Which: a sequence that runs in order (`executable.runs_in_order`: short, a chain, or talking
to other devices) of at least `MANY_THUNKS` thunks, or holding control flow, gets one driver
for all of it (`plan.driver`); a sequence the executor runs as a dependency graph on the
pool keeps that walk, and each control-flow thunk in it gets a driver of its own.

What the driver does for each thunk inside:
- `kernel`: a direct call (the kernels are linked into the same object), its pointers the
  execution's base addresses plus the slices' offsets, its scratch arguments those of the
  first concurrent call (the driver calls it alone);
- `gemm`: `cblas_?gemm` through a pointer the runtime imports (the BLAS numpy ships, or for a
  GEMM in parts the runtime's `mlirxla_gemm_?`, which has its signature), once per matrix of
  a batch of at most `UNROLLED_GEMMS`; a batch in parts, any size, is one call of the
  runtime's `mlirxla_gemm_batch_?`;
- `copy`: memmove; `parallel_copy`: memmoves in an order where no copy overwrites what a
  later one reads, the copies caught in a cycle through stack buffers, `STACK_BYTES` at
  most per driver (a cycle past that is called back);
- `host` calls of jax's cpu LAPACK routines getrf, potrf, trsm, syevd, geqrf, orgqr, gesdd,
  gtsv and geev (`lapack_ffi`) on f32, f64, complex64 and complex128 matrices (heevd for a
  complex syevd) in column-major buffers, a batch the Python path would not split over the
  threads
  (`lapack_batches.batch_parts`): the operand overwritten is copied to its result buffer
  (memmove), then scipy's routine, imported by address, is called on each matrix as
  `runtime/lapack_ffi.py` calls it (unrolled up to `UNROLLED_GEMMS` matrices, a loop past
  that), its scalar arguments and workspaces (syevd's fixed ones, geqrf's, orgqr's and
  gesdd's of the size LAPACK's query reports at compile time, as the Python path asks at run time;
  `WORKSPACE_BYTES` at most per driver) on the driver's stack (a small solve in a loop, a Kalman filter's,
  called back three times an iteration, took 120 us a call; a batch of 1000 8 x 8
  triangular solves 0.36 ms, twice XLA:CPU's); geev copies each matrix to the stack, skips
  one with a NaN or infinity, and unpacks a real one's vectors into complex ones as jaxlib
  does (a 7 x 7 `eigvals` 110 -> 21 us, XLA:CPU 20; a batch of four 5 x 5 `eig` 155 -> 34,
  XLA:CPU 26);
- `while` and `conditional` inside: native loops and switches, the predicate or index read
  from its buffer as the Python walk reads it (a byte unsigned, 4 or 8 bytes signed; an
  index out of range takes the last branch); a loop of proved trip count counts its
  iterations on the stack and never runs its condition;
- `sliced_kernel`, in a single device's program: `mlirxla_pool_run` over a function of the
  driver's module that calls the kernel on one slice, so the native pool's threads run the
  slices with no Python between them (a grid's are called back: its devices' threads may run
  them whole);
- anything else (other host calls, collectives, larger GEMM batches): a call back into
  Python for that thunk alone.

A control-flow thunk with nothing native inside keeps the Python walk: a driver would only
call back. Every choice is recorded in the decisions (the thunk-sequence dump).
"""

from dataclasses import dataclass, field
from math import prod

import numpy as np

from mlirxla.runtime import native_drivers
from mlirxla.runtime.lapack_batches import batch_parts, lapack_int
from mlirxla.runtime.lapack_ffi import (GEEV_NON_FINITE_INFO, geev_workspace, geqrf_workspace, heevd_workspaces, orgqr_workspace,
                                        svd_real_workspace, svd_work_per_cube, svd_workspace, syevd_workspaces)
from mlirxla.runtime.native_drivers import NativeDriver
from mlirxla.runtime.thunks import (BufferSlice, ConditionalThunk, CopyThunk, GemmThunk, HostThunk, KernelThunk,
                                    ParallelCopyThunk, SlicedKernelThunk, WhileThunk, every_thunk)

from .thunk_emitter import symbol_for

MANY_THUNKS = 3  # a sequence this long (or holding control flow) runs faster in one driver
UNROLLED_GEMMS = 16
STACK_BYTES = 64 << 10
BLAS = {"f32": ("cblas_sgemm", "float"), "f64": ("cblas_dgemm", "double")}
POOLED_BLAS = {"f32": "mlirxla_gemm_f32", "f64": "mlirxla_gemm_f64"}  # the runtime's GEMMs in parts
POOLED_BATCHES = {"f32": "mlirxla_gemm_batch_f32", "f64": "mlirxla_gemm_batch_f64"}  # and their batches
ROW_MAJOR, NO_TRANSPOSE, TRANSPOSE = 101, 111, 112
NATIVE_LAPACK = ("getrf", "potrf", "trsm", "syevd", "geqrf", "orgqr", "gesdd", "gtsv", "geev")  # jax's cpu LAPACK calls a driver makes itself
WORKSPACE_BYTES = 512 << 10  # the LAPACK workspaces a driver keeps on its stack at most
# letter, LLVM type, bytes; the one, trsm's alpha (passed by reference, complex ones too)
LAPACK_TYPES = {"float32": ("s", "float", 4), "float64": ("d", "double", 8),
                "complex64": ("c", "{ float, float }", 8), "complex128": ("z", "{ double, double }", 16)}
LAPACK_ONES = {"float32": "1.0", "float64": "1.0", "complex64": "{ float 1.0, float 0.0 }", "complex128": "{ double 1.0, double 0.0 }"}
COMPLEX_NAMES = {"orgqr": "ungqr", "syevd": "heevd"}  # LAPACK's name of a routine for complex matrices, where it differs


def overwritten_operand(routine: str) -> int:
    """The operand a routine overwrites (copied to its first result): orgqr's reflectors, not
    their scalars; trsm's right-hand sides, its last."""
    return 0 if routine == "orgqr" else -1


def first_offset(argument: tuple) -> int:
    """The bytes into its slice where a stepped LAPACK argument (slice, step[, first]) starts."""
    return argument[2] if len(argument) > 2 else 0


def lapack_name(routine: str, dtype: str) -> str:
    letter = LAPACK_TYPES[dtype][0]
    return letter + (COMPLEX_NAMES.get(routine, routine) if dtype.startswith("complex") else routine)


@dataclass
class DriverSource:
    symbol: str
    ir_text: str
    calls: list[str]  # the kernels it calls directly (defined elsewhere in the object)


@dataclass
class _Counts:
    native: int = 0
    python: list[str] = field(default_factory=list)


def python_reason(thunk) -> str | None:
    """Why the driver calls `thunk` back into Python (None: it runs it natively)."""
    if isinstance(thunk, SlicedKernelThunk):
        return f"{thunk.name} (sliced kernel x{thunk.slices}: its slices spread over the thread pool)"
    if isinstance(thunk, (KernelThunk, CopyThunk, WhileThunk, ConditionalThunk)):
        return None
    if isinstance(thunk, GemmThunk):
        if thunk.element not in BLAS:
            return f"{thunk.name} (a {thunk.element} GEMM)"
        native = thunk.batch <= UNROLLED_GEMMS or thunk.in_parts
        return None if native else f"{thunk.name} (a batch of {thunk.batch} GEMMs)"
    if isinstance(thunk, ParallelCopyThunk):
        return None
    if isinstance(thunk, HostThunk) and lapack_problem(thunk) is None:
        return None
    return f"{thunk.name} ({thunk.kind} thunk)"


def lapack_problem(thunk: HostThunk) -> str | None:
    """Why the driver does not call the host call `thunk`'s LAPACK routine itself (None: it
    does)."""
    attributes = thunk.attributes
    if thunk.call != "lapack_ffi" or attributes["routine"] not in NATIVE_LAPACK:
        return "not one of the LAPACK routines a driver calls"
    _, shape, dtype = thunk.operands[overwritten_operand(attributes["routine"])]
    if dtype not in LAPACK_TYPES or np.dtype(lapack_int()) != np.int32:
        return f"{dtype} matrices, or LAPACK integers of {np.dtype(lapack_int()).itemsize} bytes"
    if 0 in shape:
        return f"empty matrices {shape}"
    if attributes["routine"] == "geev":
        return geev_problem(thunk)
    work_per_cube = svd_work_per_cube(attributes["config"]["mode"]) if attributes["routine"] == "gesdd" else None
    if batch_parts(LAPACK_TYPES[dtype][0] + attributes["routine"], prod(shape[:-2]), prod(shape[-2:]), work_per_cube) > 1:
        return f"a batch of {prod(shape[:-2])} matrices of {shape[-2:]} run in parts over the threads"
    matrices = [(operand, order) for operand, order in zip(thunk.operands, attributes["operand_orders"]) if len(operand[1]) == len(shape)]
    written = 3 if attributes["routine"] == "gtsv" else 0  # the result holding the overwritten matrix (gtsv's: after the diagonals)
    matrices.append((thunk.results[written], attributes["result_orders"][written]))
    if any(order != column_major_order(len(matrix_shape)) for (_, matrix_shape, _), order in matrices):
        return "a matrix not in column-major order"
    return None


def unpack_eigenvectors(real: str) -> str:
    """jaxlib's UnpackEigenvectors for one n x n matrix of a real geev's column-major vectors:
    column j starts a complex conjugate pair where its eigenvalue's imaginary part is nonzero
    and not NaN and a column follows, giving columns j and j + 1 the vectors re + i im and
    re - i im (re, im the packed columns); other columns become complex with imaginary part 0.
    Each part is computed as numpy computes `re + 1j * im` (signed zeros included), so that
    the driver's results are the Python path's bit for bit."""
    t = "float" if real == "f32" else "double"
    c = f"{{ {t}, {t} }}"
    return f"""define internal void @mlirxla.unpack_eigenvectors.{real}(ptr %packed, ptr %imaginary, ptr %out, i64 %n) {{
entry:
  %last = sub i64 %n, 1
  br label %column
column:
  %j = phi i64 [0, %entry], [%after_pair, %pair_done], [%after_single, %single_done]
  %more = icmp slt i64 %j, %n
  br i1 %more, label %classify, label %done
classify:
  %wi_at = getelementptr {t}, ptr %imaginary, i64 %j
  %wi = load {t}, ptr %wi_at
  %complex_value = fcmp one {t} %wi, 0.0
  %has_next = icmp slt i64 %j, %last
  %pair = and i1 %complex_value, %has_next
  %column_start = mul i64 %j, %n
  br i1 %pair, label %pair_rows, label %single_rows
pair_rows:
  %i = phi i64 [0, %classify], [%i_next, %pair_rows]
  %re_index = add i64 %column_start, %i
  %im_index = add i64 %re_index, %n
  %re_at = getelementptr {t}, ptr %packed, i64 %re_index
  %im_at = getelementptr {t}, ptr %packed, i64 %im_index
  %re = load {t}, ptr %re_at
  %im = load {t}, ptr %im_at
  %zero_im = fmul {t} 0.0, %im
  %first_re = fadd {t} %re, %zero_im
  %first_im = fadd {t} 0.0, %im
  %second_re = fsub {t} %re, %zero_im
  %second_im = fsub {t} 0.0, %im
  %first = getelementptr {c}, ptr %out, i64 %re_index, i32 0
  %first_i = getelementptr {c}, ptr %out, i64 %re_index, i32 1
  %second = getelementptr {c}, ptr %out, i64 %im_index, i32 0
  %second_i = getelementptr {c}, ptr %out, i64 %im_index, i32 1
  store {t} %first_re, ptr %first
  store {t} %first_im, ptr %first_i
  store {t} %second_re, ptr %second
  store {t} %second_im, ptr %second_i
  %i_next = add i64 %i, 1
  %rows_left = icmp slt i64 %i_next, %n
  br i1 %rows_left, label %pair_rows, label %pair_done
pair_done:
  %after_pair = add i64 %j, 2
  br label %column
single_rows:
  %k = phi i64 [0, %classify], [%k_next, %single_rows]
  %index = add i64 %column_start, %k
  %value_at = getelementptr {t}, ptr %packed, i64 %index
  %value = load {t}, ptr %value_at
  %target = getelementptr {c}, ptr %out, i64 %index, i32 0
  %target_i = getelementptr {c}, ptr %out, i64 %index, i32 1
  store {t} %value, ptr %target
  store {t} 0.0, ptr %target_i
  %k_next = add i64 %k, 1
  %more_rows = icmp slt i64 %k_next, %n
  br i1 %more_rows, label %single_rows, label %single_done
single_done:
  %after_single = add i64 %j, 1
  br label %column
done:
  ret void
}}
"""


def geev_problem(thunk: HostThunk) -> str | None:
    """Why the driver does not call geev itself: at most `UNROLLED_GEMMS` matrices, one copied
    to the stack at a time (geev overwrites it; jax's operand is not one of its results)."""
    shape = thunk.operands[0][1]
    if prod(shape[:-2]) > UNROLLED_GEMMS:
        return f"a batch of {prod(shape[:-2])} matrices, past the {UNROLLED_GEMMS} a driver unrolls"
    if thunk.attributes["operand_orders"][0] != column_major_order(len(shape)):
        return "a matrix not in column-major order"
    return None


def workspace_bytes(thunk: HostThunk) -> int:
    """What a LAPACK host call the driver makes takes of its stack for workspaces."""
    routine = thunk.attributes.get("routine") if thunk.call == "lapack_ffi" else None
    if routine not in ("syevd", "geqrf", "orgqr", "gesdd", "geev"):
        return 0
    _, shape, dtype = thunk.operands[overwritten_operand(routine)]
    width = LAPACK_TYPES[dtype][2]
    if routine == "geev":
        n, config = shape[-1], thunk.attributes["config"]
        sides = (config["compute_left"], config["compute_right"])
        real_work = 2 * n * real_width(dtype) if dtype.startswith("complex") else 0
        packed = 0 if dtype.startswith("complex") else sides.count("V") * n * n
        return (n * n + packed + geev_workspace(n, dtype, *sides)) * width + real_work
    if routine == "syevd":
        work, integer_work = syevd_workspaces(shape[-1])
        if dtype.startswith("complex"):
            complex_work, real_work = heevd_workspaces(shape[-1])
            return complex_work * width + real_work * real_width(dtype) + integer_work * 4
        return work * width + integer_work * 4
    if routine == "gesdd":
        real_work, integer_work = svd_side_workspaces(thunk)
        return optimal_work(thunk) * width + real_work * real_width(dtype) + integer_work * 4
    return optimal_work(thunk) * width


def real_width(dtype: str) -> int:
    """The bytes of one real number of `dtype` (a complex one's part)."""
    return LAPACK_TYPES[dtype][2] // (2 if dtype.startswith("complex") else 1)


def optimal_work(thunk: HostThunk) -> int:
    """The optimal workspace of a geqrf, orgqr or gesdd call, in elements, as the Python path
    asks LAPACK for it (the blocked algorithm LAPACK then takes depends on it, and with it the bits)."""
    routine = thunk.attributes["routine"]
    (n, m), dtype = thunk.operands[overwritten_operand(routine)][1][-2:], thunk.operands[0][2]
    if routine == "geqrf":
        return geqrf_workspace(m, n, dtype)
    if routine == "gesdd":
        return svd_workspace("gesdd", m, n, thunk.attributes["config"]["mode"], dtype)
    return orgqr_workspace(m, n, thunk.operands[1][1][-1], dtype)


def svd_side_workspaces(thunk: HostThunk) -> tuple[int, int]:
    """gesdd's real workspace (complex matrices only) and integer workspace, in elements."""
    (n, m), dtype = thunk.operands[0][1][-2:], thunk.operands[0][2]
    real_work = svd_real_workspace(m, n, thunk.attributes["config"]["mode"]) if dtype.startswith("complex") else 0
    return real_work, 8 * min(m, n)


def column_major_order(rank: int) -> list[int]:
    """The major-to-minor order of a batch of column-major matrices."""
    return list(range(rank - 2)) + [rank - 1, rank - 2]


def overlaps(a: BufferSlice, b: BufferSlice) -> bool:
    return a.allocation == b.allocation and a.offset < b.offset + b.size and b.offset < a.offset + a.size


def copy_order(copies) -> tuple[list, list]:
    """(copies in an order where none overwrites a later one's source, the copies left in a
    cycle, which need their sources saved first)."""
    remaining, ordered = list(copies), []
    while remaining:
        free = next((c for c in remaining if not any(overlaps(c.destination, o.source) for o in remaining if o is not c)), None)
        if free is None:
            break
        ordered.append(free)
        remaining.remove(free)
    return ordered, remaining


def cycle_bytes(thunk: ParallelCopyThunk) -> int:
    """What a parallel copy's cycle keeps on the stack."""
    return sum(c.source.size for c in copy_order(thunk.copies)[1])


class DriverWriter:
    """The LLVM IR of one driver, written as text: `entry` loads what every iteration uses
    (base addresses, imports) and holds the stack buffers; `body` is the control flow."""

    def __init__(self, symbol: str, thunks: list, pool_threads: int = 0):
        self.symbol = symbol
        self.pool_threads = pool_threads  # sliced kernels run on the native pool's threads (0: called back)
        self.slice_functions: list[str] = []
        self.positions = {id(thunk): index for index, thunk in enumerate(every_thunk(thunks))}
        self.entry: list[str] = []
        self.body: list[str] = []
        self.names = 0
        self.bases: dict[int, str] = {}
        self.imports: list[str] = [native_drivers.PYTHON]
        self.loaded_imports: dict[str, str] = {}
        self.kernels: dict[str, int] = {}
        self.python_thunks: list[int] = []
        self.python_reasons: list[str] = []
        self.counts = _Counts()
        self.stack_bytes = 0  # what the parallel copies' cycles keep on the stack
        self.workspace_bytes = 0  # what LAPACK's workspaces take of the stack
        self.constants: dict[tuple[str, str], str] = {}  # scalars passed by reference, on the stack
        self.unpackers: set[str] = set()  # the real types whose eigenvector unpacking the driver calls

    def fresh(self, stem: str) -> str:
        self.names += 1
        return f"{stem}{self.names}"

    # --- values ----------------------------------------------------------------------------

    def base(self, allocation: int) -> str:
        if allocation not in self.bases:
            slot, name = f"%slot{allocation}", f"%base{allocation}"
            self.entry += [f"  {slot} = getelementptr i64, ptr %bases, i64 {allocation}", f"  {name} = load ptr, ptr {slot}"]
            self.bases[allocation] = name
        return self.bases[allocation]

    def address(self, at: BufferSlice, extra: int = 0) -> str:
        name = "%" + self.fresh("p")
        self.body.append(f"  {name} = getelementptr i8, ptr {self.base(at.allocation)}, i64 {at.offset + extra}")
        return name

    def imported(self, name: str) -> str:
        if name not in self.loaded_imports:
            self.imports.append(name)
            slot, value = "%" + self.fresh("import_slot"), "%" + self.fresh("import")
            self.entry += [f"  {slot} = getelementptr i64, ptr %imports, i64 {len(self.imports) - 1}",
                           f"  {value} = load ptr, ptr {slot}"]
            self.loaded_imports[name] = value
        return self.loaded_imports[name]

    def scalar(self, at: BufferSlice) -> str:
        """The predicate's or index's value as i64, read as `thunks._read_scalar` reads it."""
        pointer = self.address(at)
        width = {1: "i8", 4: "i32"}.get(at.size, "i64")
        loaded, value = "%" + self.fresh("v"), "%" + self.fresh("v")
        self.body.append(f"  {loaded} = load {width}, ptr {pointer}")
        if width == "i64":
            return loaded
        extend = "zext" if width == "i8" else "sext"
        self.body.append(f"  {value} = {extend} {width} {loaded} to i64")
        return value

    def label(self, name: str) -> None:
        self.body.append(f"{name}:")

    # --- thunks ----------------------------------------------------------------------------

    def emit_sequence(self, thunks: list) -> None:
        for thunk in thunks:
            self.emit(thunk)

    def emit(self, thunk) -> None:
        reason = None if isinstance(thunk, SlicedKernelThunk) and self.pool_threads else python_reason(thunk)
        if isinstance(thunk, ParallelCopyThunk) and self.stack_bytes + cycle_bytes(thunk) > STACK_BYTES:
            reason = f"{thunk.name} (copy cycles over the driver's {STACK_BYTES} bytes of stack)"
        if isinstance(thunk, HostThunk) and reason is None and self.workspace_bytes + workspace_bytes(thunk) > WORKSPACE_BYTES:
            reason = f"{thunk.name} (LAPACK workspaces over the driver's {WORKSPACE_BYTES} bytes of stack)"
        if reason is not None:
            self.emit_call_back(thunk, reason)
        elif isinstance(thunk, WhileThunk):
            self.emit_while(thunk)
        elif isinstance(thunk, ConditionalThunk):
            self.emit_conditional(thunk)
        elif isinstance(thunk, SlicedKernelThunk):
            self.emit_sliced_kernel(thunk)
        elif isinstance(thunk, KernelThunk):
            self.emit_kernel(thunk)
        elif isinstance(thunk, GemmThunk):
            self.emit_gemm(thunk)
        elif isinstance(thunk, CopyThunk):
            self.emit_copy(thunk.source, thunk.destination)
        elif isinstance(thunk, HostThunk) and thunk.attributes["routine"] == "geev":
            self.emit_geev(thunk)
        elif isinstance(thunk, HostThunk):
            self.emit_lapack(thunk)
        else:
            self.emit_parallel_copy(thunk)

    def emit_call_back(self, thunk, reason: str) -> None:
        index = len(self.python_thunks)
        self.python_thunks.append(self.positions[id(thunk)])
        self.python_reasons.append(reason)
        self.counts.python.append(reason)
        status, failed, next_block = "%" + self.fresh("status"), "%" + self.fresh("failed"), self.fresh("after_python")
        self.body += [f"  {status} = call i32 {self.imported(native_drivers.PYTHON)}(i64 {index})",
                      f"  {failed} = icmp ne i32 {status}, 0",
                      f"  br i1 {failed}, label %fail, label %{next_block}"]
        self.label(next_block)

    def emit_kernel(self, thunk: KernelThunk) -> None:
        pointers = [self.address(at) for at in thunk.arguments]
        if thunk.scratch is not None:
            pointers += [self.address(thunk.scratch, offset) for offset in thunk.scratch_offsets]
        self.kernels[thunk.symbol] = len(pointers)
        self.body.append(f"  call void @{thunk.symbol}({', '.join(f'ptr {p}' for p in pointers)})")
        self.counts.native += 1

    def emit_sliced_kernel(self, thunk: SlicedKernelThunk) -> None:
        """The slices on the native pool: a function of this module calls the kernel on one
        slice (`index`) with its thread's scratch (`part`), and `mlirxla_pool_run` spreads the
        slices over the pool's threads as `SlicedKernelThunk.run` does."""
        function = f"@{self.symbol}_slices{len(self.slice_functions)}"
        lines = [f"define internal void {function}(ptr %bases, i64 %index, i64 %part) {{", "entry:"]
        pointers = []
        steps = [(at, at.offset, stride, 0) for at, stride in zip(thunk.arguments, thunk.strides)]
        if thunk.scratch is not None:
            steps += [(thunk.scratch, thunk.scratch.offset + offset, 0, thunk.scratch.size) for offset in thunk.scratch_offsets]
        for k, (at, offset, stride, part_step) in enumerate(steps):
            lines += [f"  %slot{k} = getelementptr i64, ptr %bases, i64 {at.allocation}", f"  %base{k} = load ptr, ptr %slot{k}",
                      f"  %stepped{k} = mul i64 %index, {stride}", f"  %parted{k} = mul i64 %part, {part_step}",
                      f"  %moved{k} = add i64 %stepped{k}, %parted{k}", f"  %offset{k} = add i64 %moved{k}, {offset}",
                      f"  %pointer{k} = getelementptr i8, ptr %base{k}, i64 %offset{k}"]
            pointers.append(f"ptr %pointer{k}")
        lines += [f"  call void @{thunk.symbol}({', '.join(pointers)})", "  ret void", "}"]
        self.slice_functions.append("\n".join(lines))
        self.kernels[thunk.symbol] = len(pointers)
        parts = min(self.pool_threads, thunk.scratch_parts if thunk.scratch is not None else thunk.slices)
        run, pool = self.imported(native_drivers.POOL_RUN), self.imported(native_drivers.POOL)
        self.body.append(f"  call i32 {run}(ptr {pool}, ptr {function}, ptr %bases, i64 {thunk.slices}, i64 {parts})")
        self.counts.native += 1

    def emit_gemm(self, thunk: GemmThunk) -> None:
        name, scalar = BLAS[thunk.element]
        width = 4 if thunk.element == "f32" else 8
        lda = thunk.m if thunk.transpose_lhs else thunk.k
        ldb = thunk.k if thunk.transpose_rhs else thunk.n
        ta = TRANSPOSE if thunk.transpose_lhs else NO_TRANSPOSE
        tb = TRANSPOSE if thunk.transpose_rhs else NO_TRANSPOSE
        if thunk.in_parts and thunk.batch > 1:
            batched = self.imported(POOLED_BATCHES[thunk.element])
            a, b, c = (self.address(at) for at in (thunk.lhs, thunk.rhs, thunk.out))
            self.body.append(f"  call void {batched}(i32 {ta}, i32 {tb}, i64 {thunk.m}, i64 {thunk.n}, i64 {thunk.k}, "
                             f"ptr {a}, i64 {lda}, ptr {b}, i64 {ldb}, ptr {c}, i64 {thunk.n}, i64 {thunk.batch}, "
                             f"i64 {thunk.m * thunk.k}, i64 {thunk.k * thunk.n}, i64 {thunk.m * thunk.n})")
            self.counts.native += 1
            return
        function = self.imported(POOLED_BLAS[thunk.element] if thunk.in_parts else name)
        for index in range(thunk.batch):
            a = self.address(thunk.lhs, index * thunk.m * thunk.k * width)
            b = self.address(thunk.rhs, index * thunk.k * thunk.n * width)
            c = self.address(thunk.out, index * thunk.m * thunk.n * width)
            self.body.append(f"  call void {function}(i32 {ROW_MAJOR}, i32 {ta}, i32 {tb}, i64 {thunk.m}, i64 {thunk.n}, "
                             f"i64 {thunk.k}, {scalar} 1.0, ptr {a}, i64 {lda}, ptr {b}, i64 {ldb}, {scalar} 0.0, "
                             f"ptr {c}, i64 {thunk.n})")
        self.counts.native += 1

    def emit_lapack(self, thunk: HostThunk) -> None:
        """scipy's routine on each matrix of the batch, as `lapack_ffi` calls it: getrf (m, n,
        a, lda, pivots, info) and potrf (uplo, n, a, lda, info) factor the operand copied to
        their first result, trsm (side, uplo, trans, diag, m, n, alpha = 1, a, lda, b, ldb)
        solves in the right-hand sides copied to its result, syevd (jobz = V, uplo, n, a, lda, w,
        work, lwork, iwork, liwork, info) decomposes the operand copied to its first result in
        jaxlib's fixed workspaces, gtsv (n, nrhs, dl + 1, d, du, b, ldb, info) solves in the
        diagonals and right-hand sides copied to its first four results. An argument is a
        pointer on the stack (a constant, a workspace), or (slice, bytes from one matrix's to
        the next[, bytes into the slice where the first starts])."""
        routine, config = thunk.attributes["routine"], thunk.attributes["config"]
        overwritten, _, dtype = thunk.operands[overwritten_operand(routine)]
        _, scalar, width = LAPACK_TYPES[dtype]
        copied = thunk.operands if routine == "gtsv" else [thunk.operands[overwritten_operand(routine)]]
        for (operand, _, _), (result_at, _, _) in zip(copied, thunk.results):
            self.emit_copy(operand, result_at)
        matrix = thunk.operands[overwritten_operand(routine)][1]
        (n, m), count = matrix[-2:], prod(matrix[:-2])  # buffers of column-major matrices
        integer, character = (lambda value: self.constant("i32", value)), (lambda key: self.constant("i8", ord(config[key])))
        result = [at for at, _, _ in thunk.results]
        if routine == "getrf":  # pivots and info: LAPACK's 4-byte integers
            arguments = [integer(m), integer(n), (result[0], m * n * width), integer(max(m, 1)),
                         (result[1], min(m, n) * 4), (result[2], 4)]
        elif routine == "potrf":
            arguments = [character("uplo"), integer(n), (result[0], n * n * width), integer(max(n, 1)), (result[1], 4)]
        elif routine == "syevd":  # heevd for complex matrices: a complex work, then a real one
            work, integer_work = syevd_workspaces(n)
            if dtype.startswith("complex"):
                complex_work, real_work = heevd_workspaces(n)
                works = [self.stack_buffer(complex_work * width), integer(complex_work),
                         self.stack_buffer(real_work * real_width(dtype)), integer(real_work)]
            else:
                works = [self.stack_buffer(work * width), integer(work)]
            arguments = [self.constant("i8", ord("V")), character("uplo"), integer(n), (result[0], n * n * width),
                         integer(max(n, 1)), (result[1], n * real_width(dtype)), *works,
                         self.stack_buffer(integer_work * 4), integer(integer_work), (result[2], 4)]
            self.workspace_bytes += workspace_bytes(thunk)
        elif routine == "gesdd":
            arguments = self.svd_arguments(thunk, m, n, width)
            self.workspace_bytes += workspace_bytes(thunk)
        elif routine == "gtsv":  # jax's sub-diagonal starts with a padding element: LAPACK gets dl + 1
            arguments = [integer(m), integer(n), (result[0], m * width, width), (result[1], m * width), (result[2], m * width),
                         (result[3], m * n * width), integer(max(m, 1)), (result[4], 4)]
        elif routine in ("geqrf", "orgqr"):
            work = optimal_work(thunk)
            reflectors = min(m, n) if routine == "geqrf" else thunk.operands[1][1][-1]
            scalars = (result[1], reflectors * width) if routine == "geqrf" else (thunk.operands[1][0], reflectors * width)
            sizes = [integer(m), integer(n)] + ([] if routine == "geqrf" else [integer(reflectors)])
            arguments = sizes + [(result[0], m * n * width), integer(max(m, 1)), scalars, self.stack_buffer(max(work, 1) * width),
                                 integer(work), self.stack_buffer(4)]
            self.workspace_bytes += workspace_bytes(thunk)
        else:
            order = thunk.operands[0][1][-1]
            arguments = [character("side"), character("uplo"), character("trans_x"), character("diag"), integer(m), integer(n),
                         self.constant(scalar, LAPACK_ONES[dtype]), (thunk.operands[0][0], order * order * width), integer(max(order, 1)),
                         (result[0], m * n * width), integer(max(m, 1))]
        function = self.imported(native_drivers.LAPACK_PREFIX + lapack_name(routine, dtype))
        if count <= UNROLLED_GEMMS:
            for index in range(count):
                pointers = [argument if isinstance(argument, str) else self.address(argument[0], index * argument[1] + first_offset(argument))
                            for argument in arguments]
                self.body.append(f"  call void {function}({', '.join(f'ptr {p}' for p in pointers)})")
        else:
            self.emit_batch_loop(function, arguments, count)
        self.counts.native += 1

    def emit_geev(self, thunk: HostThunk) -> None:
        """geev as `lapack_ffi.geev` calls it: the results zeroed, then each matrix with only
        finite entries copied to the stack and decomposed, one with a NaN or an infinity left
        out with info -4, as jaxlib does (LAPACK's balancing does not return on them). A real
        geev's vectors come packed (a complex pair's real and imaginary parts in two columns)
        in stack buffers, and are unpacked into the complex results where it succeeded
        (`UNPACK_EIGENVECTORS`, jaxlib's rule); a complex geev writes its results itself."""
        a, shape, dtype = thunk.operands[0]
        _, _, width = LAPACK_TYPES[dtype]
        n, count = shape[-1], prod(shape[:-2])
        config, complex_type = thunk.attributes["config"], dtype.startswith("complex")
        sides = (config["compute_left"], config["compute_right"])
        results = [at for at, _, _ in thunk.results]
        for at in results[:-1]:
            if at.size:
                self.body.append(f"  call void @llvm.memset.p0.i64(ptr {self.address(at)}, i8 0, i64 {at.size}, i1 false)")
        work = geev_workspace(n, dtype, *sides)
        copy, workspace = self.stack_buffer(n * n * width), self.stack_buffer(max(work, 1) * width)
        side = [self.stack_buffer(2 * n * real_width(dtype))] if complex_type else []
        packed = [self.stack_buffer(n * n * width) if mode == "V" and not complex_type else None for mode in sides]
        jobs = [self.constant("i8", ord(mode)) for mode in sides]
        order, size = self.constant("i32", n), self.constant("i32", work)
        function = self.imported(native_drivers.LAPACK_PREFIX + lapack_name("geev", dtype))
        values, vectors, info = (results[:1] if complex_type else results[:2]), results[-3:-1], results[-1]
        for index in range(count):
            matrix, matrix_info = self.address(a, index * n * n * width), self.address(info, index * 4)
            decompose, skip, after = self.fresh("decompose"), self.fresh("non_finite"), self.fresh("after_geev")
            self.body.append(f"  br i1 {self.all_finite(matrix, n * n * (2 if complex_type else 1), real_width(dtype))}, "
                             f"label %{decompose}, label %{skip}")
            self.label(decompose)
            self.body.append(f"  call void @llvm.memcpy.p0.p0.i64(ptr {copy}, ptr {matrix}, i64 {n * n * width}, i1 false)")
            written = [buffer or self.address(at, index * at.size // count) for buffer, at in zip(packed, vectors)]
            pointers = (jobs + [order, copy, order] + [self.address(at, index * at.size // count) for at in values]
                        + [written[0], order, written[1], order, workspace, size] + side + [matrix_info])
            self.body.append(f"  call void {function}({', '.join(f'ptr {p}' for p in pointers)})")
            if any(packed):
                self.emit_unpacking(packed, vectors, values[1], matrix_info, index, count, n, dtype)
            self.body.append(f"  br label %{after}")
            self.label(skip)
            self.body += [f"  store i32 {GEEV_NON_FINITE_INFO}, ptr {matrix_info}", f"  br label %{after}"]
            self.label(after)
        self.workspace_bytes += workspace_bytes(thunk)
        self.counts.native += 1

    def emit_unpacking(self, packed: list, vectors: list, imaginary: BufferSlice, matrix_info: str, index: int, count: int,
                       n: int, dtype: str) -> None:
        """A real geev's packed vectors unpacked into matrix `index`'s complex results, where
        its info is 0 (the results stay zeros elsewhere, as jaxlib leaves them)."""
        real = "f32" if dtype == "float32" else "f64"
        self.unpackers.add(real)
        status, succeeded, unpack, done = "%" + self.fresh("geev_info"), "%" + self.fresh("succeeded"), self.fresh("unpack"), self.fresh("unpacked")
        self.body += [f"  {status} = load i32, ptr {matrix_info}", f"  {succeeded} = icmp eq i32 {status}, 0",
                      f"  br i1 {succeeded}, label %{unpack}, label %{done}"]
        self.label(unpack)
        imaginary_parts = self.address(imaginary, index * imaginary.size // count)
        for buffer, at in zip(packed, vectors):
            if buffer is not None:
                self.body.append(f"  call void @mlirxla.unpack_eigenvectors.{real}(ptr {buffer}, ptr {imaginary_parts}, "
                                 f"ptr {self.address(at, index * at.size // count)}, i64 {n})")
        self.body.append(f"  br label %{done}")
        self.label(done)

    def all_finite(self, start: str, count: int, width: int) -> str:
        """An i1: whether the `count` reals of `width` bytes from `start` are all finite (a loop
        over them, its counter and verdict on the stack)."""
        real = "float" if width == 4 else "double"
        counter, verdict = "%" + self.fresh("element_slot"), "%" + self.fresh("finite_slot")
        loop, done = self.fresh("finite_check"), self.fresh("checked")
        self.entry += [f"  {counter} = alloca i64", f"  {verdict} = alloca i1"]
        self.body += [f"  store i64 0, ptr {counter}", f"  store i1 true, ptr {verdict}", f"  br label %{loop}"]
        self.label(loop)
        index, at, value, magnitude, finite, so_far, still, following, last = ("%" + self.fresh(stem) for stem in (
            "element", "at", "value", "magnitude", "finite", "so_far", "still", "following", "last"))
        self.body += [f"  {index} = load i64, ptr {counter}", f"  {at} = getelementptr {real}, ptr {start}, i64 {index}",
                      f"  {value} = load {real}, ptr {at}", f"  {magnitude} = call {real} @llvm.fabs.f{width * 8}({real} {value})",
                      f"  {finite} = fcmp olt {real} {magnitude}, 0x7FF0000000000000", f"  {so_far} = load i1, ptr {verdict}",
                      f"  {still} = and i1 {so_far}, {finite}", f"  store i1 {still}, ptr {verdict}",
                      f"  {following} = add i64 {index}, 1", f"  store i64 {following}, ptr {counter}",
                      f"  {last} = icmp eq i64 {following}, {count}", f"  br i1 {last}, label %{done}, label %{loop}"]
        self.label(done)
        result = "%" + self.fresh("all_finite")
        self.body.append(f"  {result} = load i1, ptr {verdict}")
        return result

    def svd_arguments(self, thunk: HostThunk, m: int, n: int, width: int) -> list:
        """gesdd's arguments as the Python path passes them (jobz, m, n, a, lda, s, u, ldu, vt,
        ldvt, work, lwork, [rwork,] iwork, info), u and vt zeroed first: LAPACK writes no
        vectors in mode N, where jaxlib's are zeros."""
        dtype, mode = thunk.operands[0][2], thunk.attributes["config"]["mode"]
        result = [at for at, _, _ in thunk.results]
        u_shape, vt_shape = thunk.results[2][1], thunk.results[3][1]  # buffers of column-major matrices: vt's rows last
        for at in result[2:4]:
            if at.size:
                self.body.append(f"  call void @llvm.memset.p0.i64(ptr {self.address(at)}, i8 0, i64 {at.size}, i1 false)")
        work = optimal_work(thunk)
        real_work, integer_work = svd_side_workspaces(thunk)
        integer = lambda value: self.constant("i32", value)  # noqa: E731
        side = [self.stack_buffer(real_work * real_width(dtype))] if real_work else []
        return ([self.constant("i8", ord(mode)), integer(m), integer(n), (result[0], m * n * width), integer(max(m, 1)),
                 (result[1], min(m, n) * real_width(dtype)), (result[2], prod(u_shape[-2:]) * width), integer(max(m, 1)),
                 (result[3], prod(vt_shape[-2:]) * width), integer(max(vt_shape[-1], 1)),
                 self.stack_buffer(max(work, 1) * width), integer(work)]
                + side + [self.stack_buffer(integer_work * 4), (result[4], 4)])

    def emit_batch_loop(self, function: str, arguments: list, count: int) -> None:
        """`function` called on each of `count` matrices by a loop: an argument (slice, step)
        at `step` bytes further each time, a pointer on the stack the same."""
        counter, loop, done = "%" + self.fresh("matrix_slot"), self.fresh("matrices"), self.fresh("after_matrices")
        self.entry.append(f"  {counter} = alloca i64")
        self.body += [f"  store i64 0, ptr {counter}", f"  br label %{loop}"]
        self.label(loop)
        index, next_index, last = "%" + self.fresh("matrix"), "%" + self.fresh("matrix"), "%" + self.fresh("last")
        self.body.append(f"  {index} = load i64, ptr {counter}")
        pointers = []
        for argument in arguments:
            if isinstance(argument, str):
                pointers.append(argument)
                continue
            step, at = "%" + self.fresh("step"), "%" + self.fresh("p")
            self.body += [f"  {step} = mul i64 {index}, {argument[1]}",
                          f"  {at} = getelementptr i8, ptr {self.address(argument[0], first_offset(argument))}, i64 {step}"]
            pointers.append(at)
        self.body += [f"  call void {function}({', '.join(f'ptr {p}' for p in pointers)})",
                      f"  {next_index} = add i64 {index}, 1", f"  store i64 {next_index}, ptr {counter}",
                      f"  {last} = icmp eq i64 {next_index}, {count}", f"  br i1 {last}, label %{done}, label %{loop}"]
        self.label(done)

    def constant(self, llvm_type: str, value) -> str:
        """A pointer to `value` on the driver's stack, for an argument passed by reference."""
        key = (llvm_type, str(value))
        if key not in self.constants:
            at = "%" + self.fresh("constant")
            self.entry += [f"  {at} = alloca {llvm_type}", f"  store {llvm_type} {value}, ptr {at}"]
            self.constants[key] = at
        return self.constants[key]

    def stack_buffer(self, size: int) -> str:
        """A pointer to `size` bytes of the driver's stack, for the whole run."""
        at = "%" + self.fresh("stack")
        self.entry.append(f"  {at} = alloca [{size} x i8], align 64")
        return at

    def emit_copy(self, source: BufferSlice, destination: BufferSlice) -> None:
        """A memmove, unless there is nothing to move: no bytes, or a slice onto itself (a
        LAPACK call whose result shares its overwritten operand's buffer)."""
        if source.size and source != destination:
            to, of = self.address(destination), self.address(source)
            self.body.append(f"  call void @llvm.memmove.p0.p0.i64(ptr {to}, ptr {of}, i64 {source.size}, i1 false)")

    def emit_parallel_copy(self, thunk: ParallelCopyThunk) -> None:
        ordered, cycle = copy_order(thunk.copies)
        kept = self.save_sources(cycle)
        for copy in ordered:
            self.emit_copy(copy.source, copy.destination)
        for copy, saved in zip(cycle, kept):
            self.body.append(f"  call void @llvm.memcpy.p0.p0.i64(ptr {self.address(copy.destination)}, ptr {saved}, "
                             f"i64 {copy.source.size}, i1 false)")
        self.counts.native += 1

    def save_sources(self, copies: list) -> list[str]:
        """Copy the sources of `copies` to a stack buffer; where each one is kept."""
        if not copies:
            return []
        self.stack_bytes += sum(c.source.size for c in copies)
        stack = self.stack_buffer(sum(c.source.size for c in copies))
        kept, offset = [], 0
        for copy in copies:
            at = "%" + self.fresh("kept")
            self.body += [f"  {at} = getelementptr i8, ptr {stack}, i64 {offset}",
                          f"  call void @llvm.memcpy.p0.p0.i64(ptr {at}, ptr {self.address(copy.source)}, i64 {copy.source.size}, i1 false)"]
            kept.append(at)
            offset += copy.source.size
        return kept

    def emit_while(self, thunk: WhileThunk) -> None:
        if thunk.trip_count is not None:
            self.emit_counted_loop(thunk)
            return
        check, body, done = self.fresh("condition"), self.fresh("body"), self.fresh("after_while")
        self.body.append(f"  br label %{check}")
        self.label(check)
        self.emit_sequence(thunk.condition)
        going = "%" + self.fresh("going")
        self.body += [f"  {going} = icmp ne i64 {self.scalar(thunk.predicate)}, 0", f"  br i1 {going}, label %{body}, label %{done}"]
        self.label(body)
        self.emit_sequence(thunk.body)
        self.body.append(f"  br label %{check}")
        self.label(done)

    def emit_counted_loop(self, thunk: WhileThunk) -> None:
        """A loop of proved trip count: the body that many times, the condition never run
        (its kernels only compute the predicate)."""
        counter = "%" + self.fresh("iterations")
        self.entry.append(f"  {counter} = alloca i64")
        check, body, done = self.fresh("count"), self.fresh("body"), self.fresh("after_while")
        left, going, fewer = "%" + self.fresh("left"), "%" + self.fresh("going"), "%" + self.fresh("left")
        self.body += [f"  store i64 {thunk.trip_count}, ptr {counter}", f"  br label %{check}"]
        self.label(check)
        self.body += [f"  {left} = load i64, ptr {counter}", f"  {going} = icmp sgt i64 {left}, 0",
                      f"  br i1 {going}, label %{body}, label %{done}"]
        self.label(body)
        self.body += [f"  {fewer} = sub i64 {left}, 1", f"  store i64 {fewer}, ptr {counter}"]
        self.emit_sequence(thunk.body)
        self.body.append(f"  br label %{check}")
        self.label(done)

    def emit_conditional(self, thunk: ConditionalThunk) -> None:
        value = self.scalar(thunk.selector)
        blocks = [self.fresh("branch") for _ in thunk.branches]
        done = self.fresh("after_conditional")
        if thunk.is_predicate:
            taken = "%" + self.fresh("taken")
            self.body += [f"  {taken} = icmp ne i64 {value}, 0", f"  br i1 {taken}, label %{blocks[0]}, label %{blocks[-1]}"]
        else:
            cases = " ".join(f"i64 {index}, label %{block}" for index, block in enumerate(blocks[:-1]))
            self.body.append(f"  switch i64 {value}, label %{blocks[-1]} [ {cases} ]")
        for block, branch in zip(blocks, thunk.branches):
            self.label(block)
            self.emit_sequence(branch)
            self.body.append(f"  br label %{done}")
        self.label(done)

    # --- the function ----------------------------------------------------------------------

    def text(self) -> str:
        declarations = [f"declare void @{symbol}({', '.join(['ptr'] * count)})" for symbol, count in self.kernels.items()]
        declarations += ["declare void @llvm.memmove.p0.p0.i64(ptr, ptr, i64, i1)",
                         "declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)",
                         "declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)",
                         "declare float @llvm.fabs.f32(float)", "declare double @llvm.fabs.f64(double)"]
        return "\n".join([
            f"; native driver {self.symbol}: the loop or conditional and its thunks in compiled code",
            *declarations, "",
            f"define i32 @{self.symbol}(ptr noalias %bases, ptr noalias %imports) {{",
            "entry:", *self.entry, "  br label %start",
            "start:", *self.body, "  ret i32 0",
            "fail:", "  ret i32 1", "}", "", *self.slice_functions,
            *(unpack_eigenvectors(real) for real in sorted(self.unpackers)), ""])


def written(name: str, thunks: list, used: set[str], pool_threads: int) -> DriverWriter:
    writer = DriverWriter(symbol_for(f"driver_{name}", used), thunks, pool_threads)
    writer.emit_sequence(thunks)
    return writer


def driver_of(writer: DriverWriter) -> NativeDriver:
    return NativeDriver(writer.symbol, tuple(writer.imports), tuple(writer.python_thunks), tuple(writer.python_reasons))


def called_back(writer: DriverWriter) -> str:
    return f"; back into Python for {', '.join(writer.counts.python)}" if writer.counts.python else ""


def drive(thunk, used: set[str], pool_threads: int) -> tuple[DriverSource | None, str]:
    """The driver of control-flow thunk `thunk` and the decision that says what it runs
    natively; (None, why not) when nothing inside could run natively."""
    writer = written(thunk.name, [thunk], used, pool_threads)
    what = f"{thunk.kind} {thunk.name}"
    if writer.counts.native == 0:
        used.discard(writer.symbol)
        return None, f"{what}: runs in Python (nothing inside runs natively: {', '.join(writer.counts.python)})"
    thunk.driver = driver_of(writer)
    decision = (f"{what}: native driver {writer.symbol} runs its control flow and {writer.counts.native} thunk(s) "
                f"in compiled code{called_back(writer)}")
    return DriverSource(writer.symbol, writer.text(), list(writer.kernels)), decision


def attach_drivers(thunks: list, used: set[str], decisions: list[str], pool_threads: int = 0) -> list[DriverSource]:
    """Give every top-level control-flow thunk of `thunks` its driver where one helps; their
    sources, to compile with the kernels. With `pool_threads`, sliced kernels run on that many
    of the native pool's threads, else they are called back."""
    sources = []
    for thunk in thunks:
        if isinstance(thunk, (WhileThunk, ConditionalThunk)):
            source, decision = drive(thunk, used, pool_threads)
            decisions.append(decision)
            if source is not None:
                sources.append(source)
    return sources


def worth_one_driver(thunks: list) -> bool:
    """Whether one driver for the whole sequence saves more than the address table it is
    handed costs to build: when the walk would make several calls, or runs control flow."""
    return len(thunks) >= MANY_THUNKS or any(isinstance(t, (WhileThunk, ConditionalThunk)) for t in thunks)


def drive_executable(plan, used: set[str], decisions: list[str], pool_threads: int = 0) -> list[DriverSource]:
    """One driver for the plan's whole thunk sequence (`plan.driver`), control flow inlined;
    the caller has made sure the sequence runs in order. Nothing when nothing in it is
    native, or when the sequence is too short to gain. `pool_threads` as `attach_drivers`."""
    if not worth_one_driver(plan.thunks):
        decisions.append(f"executable: the thunk sequence is walked in Python ({len(plan.thunks)} thunk(s): "
                         "one call each costs less than handing a driver the address table)")
        return []
    writer = written("executable", plan.thunks, used, pool_threads)
    if writer.counts.native == 0:
        used.discard(writer.symbol)
        decisions.append("executable: the thunk sequence is walked in Python (nothing in it runs natively)")
        return []
    plan.driver = driver_of(writer)
    decisions.append(f"executable: native driver {writer.symbol} runs the whole thunk sequence "
                     f"({writer.counts.native} thunk(s) in compiled code){called_back(writer)}")
    return [DriverSource(writer.symbol, writer.text(), list(writer.kernels))]
