"""A LAPACK or BLAS routine called once per matrix of a batch by one native loop: the routines
jaxlib's cpu kernels call, at the same addresses (`scipy.linalg.cython_lapack` and
`cython_blas` export them as PyCapsules; jaxlib reads the same `__pyx_capi__`).

Those functions take every argument by pointer (scipy's wrappers of the Fortran routines;
characters as `char *`, the hidden string lengths their own business), so a call over a
batch is a list of addresses, each stepping by a fixed number of bytes from one matrix to
the next: a matrix, its pivots, its `info` step by their size, a dimension or a workspace
shared by every call steps by 0, as in jaxlib's loops. `batch_loop(arity)` is that loop in
native code, `void loop(routine, count, i64 *bases, i64 *steps)` for routines of `arity`
pointer arguments, LLVM IR compiled by llvmlite once per process for every arity up to
`MAX_ARITY` (`compiled`, about 70 ms): a batch of a thousand 8x8 matrices costs the
routine's own time and one ctypes call, where calling scipy's Python wrapper matrix by
matrix cost 5-15 us each (a 1000x8x8 eigh 18 ms against jax cpu's 5). ctypes releases the
GIL for the call.

A batch of small matrices runs in parts over the native pool (`native_pool.py`, as XLA:CPU
runs its loops on its own threads; jaxlib's loop is one thread): chunks of the batch claimed
by the pool's threads, each thread with its own copy of every `Workspace`. Only where
OpenBLAS runs each call single-threaded (matrices of at most 48x48 elements), so a matrix
gets the same bits whichever thread runs it, and where the batch holds enough work
(`batch_parts`); larger matrices, small batches and BLAS's trsm stay on the calling thread.
On 2 cores a 1000x8x8 eigh ran 1.8x faster in parts, getrf 1.4x, geqrf 1.8x, 100x32x32 ones
1.3-1.9x.
"""

import ctypes
import functools
import threading
from dataclasses import dataclass

import numpy as np

from mlirxla.errors import MlirxlaError

from . import native_pool
from .ctypes_arrays import address, int64_table
from .llvm_host import compiled
from .threads import cpu_threads

MAX_ARITY = 16  # gesdd and gesvd of complex matrices take 15 arguments, the most of any routine run here
SPLIT_MATRIX_ELEMENTS = 48 * 48  # a batch of larger matrices stays on one thread
SPLIT_WORK = 1 << 17  # a batch of fewer multiply-adds is not worth a pool job (1000 8x8 Choleskys ran slower)
# a routine's multiply-adds per matrix, over n^3 (LAPACK Working Note 41's counts, halved to
# multiply-adds, complex ones left as real: a rough size, not a count)
WORK_PER_CUBE = {"potrf": 1 / 6, "getrf": 1 / 3, "geqrf": 2 / 3, "geqp3": 2 / 3, "orgqr": 2 / 3, "ungqr": 2 / 3,
                 "ormqr": 1, "unmqr": 1, "syevd": 4.5, "heevd": 4.5, "gesdd": 11, "gesvd": 11, "geev": 12.5,
                 "gees": 12.5, "gehrd": 5 / 3, "sytrd": 2 / 3, "hetrd": 2 / 3}
# gesdd and gesvd without vectors (mode N): the bidiagonalization alone, 4/3 n^3 (a batch of 16
# 16x8 singular values ran in parts over the threads at the full SVD's weight, 150-190 us
# against 92-96 in one part, XLA:CPU 88)
SINGULAR_VALUES_WORK_PER_CUBE = 4 / 3
CHUNKS_PER_PART = 4  # a thread slowed by other work on its core leaves its later chunks to the others
CACHE_LINE = 64  # the parts' workspace copies start on lines of their own


@dataclass(frozen=True)
class PerMatrix:
    """An argument that steps through `array` (its leading axes the batch, C-contiguous) one
    matrix's share at a time, from `offset` elements into each share (gtsv's `dl + 1`)."""

    array: np.ndarray
    offset: int = 0


@dataclass(frozen=True)
class Workspace:
    """A work array every call of the batch writes and none reads back (LAPACK's `work`,
    `iwork`, `rwork`): a batch run in parts gives each part a copy of its own."""

    array: np.ndarray


@functools.cache
def lapack_int() -> np.dtype:
    """The integer type of scipy's LAPACK (4 bytes unless its `_blas_int_size` says 8, as
    jaxlib reads it)."""
    import scipy.linalg.cython_lapack

    size = scipy.linalg.cython_lapack._blas_int_size() if hasattr(scipy.linalg.cython_lapack, "_blas_int_size") else 4
    return np.dtype(np.int64 if size == 8 else np.int32)


_CAPSULE_NAME = ctypes.pythonapi.PyCapsule_GetName
_CAPSULE_NAME.argtypes, _CAPSULE_NAME.restype = [ctypes.py_object], ctypes.c_char_p
_CAPSULE_POINTER = ctypes.pythonapi.PyCapsule_GetPointer
_CAPSULE_POINTER.argtypes, _CAPSULE_POINTER.restype = [ctypes.py_object, ctypes.c_char_p], ctypes.c_void_p


@functools.cache
def routine_address(name: str) -> int:
    """The address of scipy's `name` (`dsyevd`, `strsm`, ...), LAPACK's or BLAS's."""
    import scipy.linalg.cython_blas
    import scipy.linalg.cython_lapack

    for module in (scipy.linalg.cython_lapack, scipy.linalg.cython_blas):
        capsule = module.__pyx_capi__.get(name)
        if capsule is not None:
            return _CAPSULE_POINTER(capsule, _CAPSULE_NAME(capsule))
    raise MlirxlaError(f"scipy provides no LAPACK or BLAS routine {name}")


def loop_ir(arity: int) -> str:
    """LLVM IR of `lapack_batch_<arity>`: for i in [0, count): routine(bases[k] + i * steps[k]
    for each argument k)."""
    lines = [f"define void @lapack_batch_{arity}(ptr %routine, i64 %count, ptr %bases, ptr %steps) {{",
             "entry:", "  %empty = icmp sle i64 %count, 0", "  br i1 %empty, label %done, label %loop", "loop:",
             "  %i = phi i64 [ 0, %entry ], [ %next, %loop ]"]
    for k in range(arity):
        lines += [f"  %base_at{k} = getelementptr i64, ptr %bases, i64 {k}", f"  %base{k} = load i64, ptr %base_at{k}",
                  f"  %step_at{k} = getelementptr i64, ptr %steps, i64 {k}", f"  %step{k} = load i64, ptr %step_at{k}",
                  f"  %offset{k} = mul i64 %i, %step{k}", f"  %address{k} = add i64 %base{k}, %offset{k}",
                  f"  %argument{k} = inttoptr i64 %address{k} to ptr"]
    arguments = ", ".join(f"ptr %argument{k}" for k in range(arity))
    lines += [f"  call void %routine({arguments})", "  %next = add i64 %i, 1", "  %more = icmp slt i64 %next, %count",
              "  br i1 %more, label %loop, label %done", "done:", "  ret void", "}"]
    return "\n".join(lines) + "\n"


CONTEXT_HEAD = 5  # the chunk function's context: loop, routine, arity, chunk, count, then its tables


def chunk_ir() -> str:
    """LLVM IR of `lapack_batch_chunk(ctx, index, part)`, a native pool job: the batch loop at
    ctx[0] over the `index`-th chunk of ctx[3] matrices (of ctx[4]), routine ctx[1], ctx[2]
    arguments whose k-th starts at base[k] + first * step[k] + part * part_step[k] (a
    workspace's copy for the thread), the three tables after the head."""
    head = CONTEXT_HEAD
    return f"""define void @lapack_batch_chunk(ptr %context, i64 %index, i64 %part) {{
entry:
  %bases = alloca [{MAX_ARITY} x i64]
  %loop = load ptr, ptr %context
  %routine_at = getelementptr i64, ptr %context, i64 1
  %routine = load ptr, ptr %routine_at
  %arity_at = getelementptr i64, ptr %context, i64 2
  %arity = load i64, ptr %arity_at
  %chunk_at = getelementptr i64, ptr %context, i64 3
  %chunk = load i64, ptr %chunk_at
  %count_at = getelementptr i64, ptr %context, i64 4
  %count = load i64, ptr %count_at
  %first = mul i64 %index, %chunk
  %left = sub i64 %count, %first
  %short = icmp slt i64 %left, %chunk
  %matrices = select i1 %short, i64 %left, i64 %chunk
  %steps_start = add i64 {head}, %arity
  %steps = getelementptr i64, ptr %context, i64 %steps_start
  %part_steps_start = add i64 %steps_start, %arity
  br label %argument
argument:
  %k = phi i64 [ 0, %entry ], [ %next, %argument ]
  %base_index = add i64 {head}, %k
  %base_at = getelementptr i64, ptr %context, i64 %base_index
  %base = load i64, ptr %base_at
  %step_at = getelementptr i64, ptr %steps, i64 %k
  %step = load i64, ptr %step_at
  %part_step_index = add i64 %part_steps_start, %k
  %part_step_at = getelementptr i64, ptr %context, i64 %part_step_index
  %part_step = load i64, ptr %part_step_at
  %stepped = mul i64 %first, %step
  %parted = mul i64 %part, %part_step
  %sum = add i64 %base, %stepped
  %address = add i64 %sum, %parted
  %slot = getelementptr i64, ptr %bases, i64 %k
  store i64 %address, ptr %slot
  %next = add i64 %k, 1
  %more = icmp slt i64 %next, %arity
  br i1 %more, label %argument, label %call
call:
  call void %loop(ptr %routine, i64 %matrices, ptr %bases, ptr %steps)
  ret void
}}
"""


_LOOP_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p)
_COMPILING = threading.Lock()
_LOOPS: dict = {}


def batch_loop(arity: int):
    """The native loop over a batch for routines of `arity` arguments (all arities compiled
    together on first use: one small module, about as cheap as one)."""
    if not 1 <= arity <= MAX_ARITY:
        raise MlirxlaError(f"a LAPACK routine of {arity} arguments: the batch loops take 1 to {MAX_ARITY}")
    with _COMPILING:
        if not _LOOPS:
            engine = compiled("".join(loop_ir(arity) for arity in range(1, MAX_ARITY + 1)) + chunk_ir())
            _LOOPS["engine"] = engine  # the loops' code lives as long as the engine
            for size in range(1, MAX_ARITY + 1):
                _LOOPS[size] = _LOOP_TYPE(engine.get_function_address(f"lapack_batch_{size}"))
            _LOOPS["chunk"] = engine.get_function_address("lapack_batch_chunk")
    return _LOOPS[arity]


def batch_parts(routine: str, count: int, largest_matrix: int, work_per_cube: float | None = None) -> int:
    """How many threads a batch of `count` matrices of `routine` (`dgetrf`) runs on: the
    native pool's when the batch holds enough work for it (`SPLIT_WORK`, the routine's
    multiply-adds estimated from its largest matrix) and each matrix is small enough that
    OpenBLAS runs every call single-threaded (its threshold is a 64x64x64 GEMM), so the bits
    are the same whichever thread runs a matrix; else 1 (jaxlib's loop, on the calling thread).
    `work_per_cube` replaces the routine's weight (an SVD without vectors).
    BLAS's trsm and the tridiagonal solve stay whole: OpenBLAS's level-3 routines take a
    process-wide lock for their buffers, and a batch of 8x8 trsms ran 1.3x slower in parts."""
    weight = work_per_cube if work_per_cube is not None else WORK_PER_CUBE.get(routine[1:])
    if weight is None or count < 2 or largest_matrix > SPLIT_MATRIX_ELEMENTS:
        return 1
    if count * weight * largest_matrix ** 1.5 < SPLIT_WORK or cpu_threads() < 2:
        return 1
    try:
        return native_pool.shared().helpers + 1
    except MlirxlaError:  # no native pool on this platform
        return 1


def call(name: str, count: int, arguments: list, work_per_cube: float | None = None) -> None:
    """scipy's routine `name` on each of `count` matrices: an argument is a `PerMatrix`, an
    array passed at the same address to every call (a dimension, a character, a workspace),
    or None (a null pointer, as jaxlib's workspace queries pass for the matrices);
    `work_per_cube` as `batch_parts` takes it."""
    routine = routine_address(name)
    if count <= 0:
        return
    per_matrix = [argument for argument in arguments if isinstance(argument, PerMatrix)]
    parts = batch_parts(name, count, max((argument.array.size // count for argument in per_matrix), default=0), work_per_cube)
    bases, steps, part_steps, kept = [], [], [], []
    for argument in arguments:
        part_step = 0
        if argument is None:
            base, step = 0, 0
        elif isinstance(argument, PerMatrix):
            array = argument.array
            if not array.flags.c_contiguous or array.size % count:
                raise MlirxlaError(f"lapack {name}: a per-matrix argument of shape {array.shape} does not split into "
                                   f"{count} matrices")
            base, step = address(array) + argument.offset * array.itemsize, array.nbytes // count
        elif isinstance(argument, Workspace):
            part_step = -(-argument.array.nbytes // CACHE_LINE) * CACHE_LINE
            copies = argument.array if parts == 1 else np.zeros(parts * part_step, np.uint8)
            kept.append(copies)
            base, step = address(copies), 0
        else:
            base, step = address(argument), 0
        bases.append(base)
        steps.append(step)
        part_steps.append(part_step)
    loop = batch_loop(len(arguments))
    if parts == 1:
        loop(routine, count, int64_table(bases), int64_table(steps))
        return
    chunks = min(count, parts * CHUNKS_PER_PART)
    chunk = -(-count // chunks)
    context = int64_table([ctypes.cast(loop, ctypes.c_void_p).value, routine, len(arguments), chunk, count]
                          + bases + steps + part_steps)
    native_pool.shared().run(_LOOPS["chunk"], ctypes.addressof(context), -(-count // chunk), parts)
