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
"""

import ctypes
import functools
import threading
from dataclasses import dataclass

import numpy as np

from mlirxla.errors import MlirxlaError

from .ctypes_arrays import int64_table
from .llvm_host import compiled

MAX_ARITY = 16  # gesdd and gesvd of complex matrices take 15 arguments, the most of any routine run here


@dataclass(frozen=True)
class PerMatrix:
    """An argument that steps through `array` (its leading axes the batch, C-contiguous) one
    matrix's share at a time, from `offset` elements into each share (gtsv's `dl + 1`)."""

    array: np.ndarray
    offset: int = 0


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
            engine = compiled("".join(loop_ir(arity) for arity in range(1, MAX_ARITY + 1)))
            _LOOPS["engine"] = engine  # the loops' code lives as long as the engine
            for size in range(1, MAX_ARITY + 1):
                _LOOPS[size] = _LOOP_TYPE(engine.get_function_address(f"lapack_batch_{size}"))
    return _LOOPS[arity]


def call(name: str, count: int, arguments: list) -> None:
    """scipy's routine `name` on each of `count` matrices: an argument is a `PerMatrix`, an
    array passed at the same address to every call (a dimension, a character, a workspace),
    or None (a null pointer, as jaxlib's workspace queries pass for the matrices)."""
    routine = routine_address(name)
    if count <= 0:
        return
    bases, steps = [], []
    for argument in arguments:
        if argument is None:
            bases.append(0)
            steps.append(0)
        elif isinstance(argument, PerMatrix):
            array = argument.array
            if not array.flags.c_contiguous or array.size % count:
                raise MlirxlaError(f"lapack {name}: a per-matrix argument of shape {array.shape} does not split into "
                                   f"{count} matrices")
            bases.append(array.ctypes.data + argument.offset * array.itemsize)
            steps.append(array.nbytes // count)
        else:
            bases.append(argument.ctypes.data)
            steps.append(0)
    batch_loop(len(arguments))(routine, count, int64_table(bases), int64_table(steps))
