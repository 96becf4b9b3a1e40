"""The BLAS library calls run on: the OpenBLAS that numpy ships (its `cblas_?gemm` with 64-bit
integers, under the `scipy_` prefix), called through ctypes on raw pointers into the buffers,
so a GEMM writes its result in place into a slice of the slab or an output, as XLA:CPU's
library thunks do. ctypes releases the GIL for the call.

How many threads one GEMM uses is OpenBLAS's one process-wide setting (its pthreads build
has no per-thread count), and it changes results: its threaded driver blocks the contraction
otherwise than its single-threaded one (a 64x64x500 GEMM differs in its last bits). A single
device keeps OpenBLAS's own count (every core); the devices of a grid, which already run
side by side, take one thread each: eight devices that each asked for every core of a 2-core
machine started eight teams of BLAS threads that spun while waiting for each other (a
32x256x256 GEMM took 10 ms instead of 0.05). So that a GEMM's bits never depend on what else
runs, executions that want different counts never overlap: `gemm_threads` holds the count
for the body and waits while executions holding the other count run. A thread already
holding it (a device of a grid, a call nested in an execution) runs under it as it is.
"""

import ctypes
import glob
import os
import threading
from contextlib import contextmanager

import numpy as np

from mlirxla.errors import MlirxlaError

ROW_MAJOR, NO_TRANSPOSE, TRANSPOSE = 101, 111, 112
_GEMMS: dict[str, object] = {}


def _library() -> ctypes.CDLL:
    if "library" not in _GEMMS:
        folder = os.path.join(os.path.dirname(np.__file__), "..", "numpy.libs")
        found = sorted(glob.glob(os.path.join(folder, "libscipy_openblas64_*.so")))
        if not found:
            raise MlirxlaError("numpy's OpenBLAS (libscipy_openblas64_) was not found; the cpu backend needs it for GEMMs")
        _GEMMS["library"] = ctypes.CDLL(found[0])
    return _GEMMS["library"]


def gemm(element: str):
    """`cblas_sgemm` (element "f32") or `cblas_dgemm` ("f64"), typed for ctypes."""
    if element not in _GEMMS:
        scalar = {"f32": ctypes.c_float, "f64": ctypes.c_double}[element]
        function = getattr(_library(), {"f32": "scipy_cblas_sgemm64_", "f64": "scipy_cblas_dgemm64_"}[element])
        i64, pointer = ctypes.c_int64, ctypes.c_void_p
        function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, i64, i64, i64, scalar, pointer, i64,
                             pointer, i64, scalar, pointer, i64]
        function.restype = None
        _GEMMS[element] = function
    return _GEMMS[element]


class _Holding(threading.local):
    holding = False  # this thread runs under a count held for it


class _Gate:
    """Who holds OpenBLAS's thread count now: the count and how many executions hold it."""

    def __init__(self):
        self.condition = threading.Condition()
        self.count = 0
        self.holders = 0
        self.local = _Holding()
        self.own = 0  # the count OpenBLAS had when the first of the holders came
        self.get = self.set = None

    def enter(self, count: int | None) -> None:
        with self.condition:
            if self.get is None:
                library = _library()
                self.get, self.set = library.scipy_openblas_get_num_threads64_, library.scipy_openblas_set_num_threads64_
                self.get.restype, self.set.argtypes = ctypes.c_int, [ctypes.c_int]
            self.condition.wait_for(lambda: self.holders == 0 or self.count == (count or self.own))
            if self.holders == 0:
                self.own = self.count = self.get()  # whatever the process set meanwhile
            wanted = count or self.own
            if self.count != wanted:
                self.set(wanted)
                self.count = wanted
            self.holders += 1

    def leave(self) -> None:
        with self.condition:
            self.holders -= 1
            if self.holders == 0:
                if self.count != self.own:  # numpy's own matmuls find OpenBLAS as it was
                    self.set(self.own)
                    self.count = self.own
                self.condition.notify_all()


_GATE = _Gate()


class gemm_threads:
    """Within the body, GEMMs run on `count` threads each (None: OpenBLAS's own count); it
    waits while other executions run theirs on another count. On a thread that already holds
    a count (`held`), the body runs under that one."""

    def __init__(self, count: int | None):
        self.count = count
        self.entered = False

    def __enter__(self) -> None:
        if not _GATE.local.holding:
            _GATE.enter(self.count)
            _GATE.local.holding = self.entered = True

    def __exit__(self, *exception) -> None:
        if self.entered:
            _GATE.local.holding = self.entered = False
            _GATE.leave()


@contextmanager
def held():
    """Mark this thread as running under the count another thread holds for it (a device's
    thread, its grid's count)."""
    previous = _GATE.local.holding
    _GATE.local.holding = True
    try:
        yield
    finally:
        _GATE.local.holding = previous
