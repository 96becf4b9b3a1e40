"""The BLAS library calls run on: the OpenBLAS that numpy ships (its `cblas_?gemm` with 64-bit
integers, under the `scipy_` prefix), called through ctypes on raw pointers into the buffers,
so a GEMM writes its result in place into a slice of the slab or an output, as XLA:CPU's
library thunks do. ctypes releases the GIL for the call.

GEMMs run on OpenBLAS's single-threaded path: a single device's in parts over mlirxla's own
pool (`native_pool.pooled_gemm`), as XLA:CPU runs its GEMMs on its own threads, a grid's
whole on each device's thread (its devices already run side by side). OpenBLAS's thread
count is one process-wide setting (its pthreads build has no per-thread count), so an
execution holds it at one thread (`one_thread`) and gives numpy back its own count after the
last execution leaves. Its threads spin for about 0.1 s after each multithreaded GEMM: left to
them, a GEMM's workers spun on the cores the kernels after it ran on (transformer_bf16's
masked exponential took its one-thread time split over two), and eight devices of a grid,
each asking for every core of a 2-core machine, started eight teams of BLAS threads that spun
while waiting for each other (a 32x256x256 GEMM took 10 ms instead of 0.05). scipy ships an
OpenBLAS of its own, which its LAPACK (the LAPACK host calls, as jaxlib's) runs on: an
execution whose LAPACK matrices are all small holds that one at one thread too
(`one_thread(lapack=True)`).
"""

import ctypes
import glob
import os
import threading

import numpy as np

from mlirxla.errors import MlirxlaError

ROW_MAJOR, NO_TRANSPOSE, TRANSPOSE = 101, 111, 112
# `cblas_?gemm` by element type, as the library names them
GEMM_ROUTINES = {"f32": "scipy_cblas_sgemm64_", "f64": "scipy_cblas_dgemm64_"}
_GEMMS: dict[str, object] = {}


def _library() -> ctypes.CDLL:
    if "library" not in _GEMMS:
        folder = os.path.join(os.path.dirname(np.__file__), "..", "numpy.libs")
        found = sorted(glob.glob(os.path.join(folder, "libscipy_openblas64_*.so")))
        if not found:
            raise MlirxlaError("numpy's OpenBLAS (libscipy_openblas64_) was not found; the cpu backend needs it for GEMMs")
        _GEMMS["library"] = ctypes.CDLL(found[0])
    return _GEMMS["library"]


def core_name() -> str:
    """The kernel set OpenBLAS took for this CPU when it was loaded (`OPENBLAS_CORETYPE`, when
    set then, names it instead): a Zen 4 machine told `Haswell` runs its GEMMs at AVX2 speed."""
    function = _library().scipy_openblas_get_corename64_
    function.restype = ctypes.c_char_p
    return function().decode()


def gemm_prototype(element: str):
    """The ctypes type of `cblas_?gemm` for `element` ("f32" or "f64")."""
    scalar = {"f32": ctypes.c_float, "f64": ctypes.c_double}[element]
    i64, pointer = ctypes.c_int64, ctypes.c_void_p
    return ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_int, ctypes.c_int, i64, i64, i64, scalar, pointer, i64,
                            pointer, i64, scalar, pointer, i64)


def gemm(element: str):
    """`cblas_sgemm` (element "f32") or `cblas_dgemm` ("f64"), typed for ctypes."""
    if element not in _GEMMS:
        _GEMMS[element] = gemm_prototype(element)(routine_address(GEMM_ROUTINES[element]))
    return _GEMMS[element]


def routine_address(name: str) -> int:
    """Where this process has BLAS routine `name` (native code calling it is linked to it)."""
    return ctypes.cast(getattr(_library(), name), ctypes.c_void_p).value


def scipy_library() -> ctypes.CDLL | None:
    """The OpenBLAS scipy ships (32-bit integers, its LAPACK's BLAS: the routines the LAPACK
    host calls run, as jaxlib's do), or None where scipy brings no such library."""
    if "scipy" not in _GEMMS:
        try:
            import scipy
        except ImportError:
            _GEMMS["scipy"] = None
            return None
        folder = os.path.join(os.path.dirname(scipy.__file__), "..", "scipy.libs")
        found = sorted(glob.glob(os.path.join(folder, "libscipy_openblas-*.so")))
        _GEMMS["scipy"] = ctypes.CDLL(found[0]) if found else None
    return _GEMMS["scipy"]


class _Gate:
    """How many executions hold one OpenBLAS library at one thread, and the count it had
    before the first."""

    def __init__(self, library, suffix: str):
        self.library, self.suffix = library, suffix
        self.lock = threading.Lock()
        self.holders = 0
        self.own = 1
        self.get = self.set = None

    def enter(self) -> None:
        with self.lock:
            if self.get is None:
                library = self.library()
                self.get = getattr(library, f"scipy_openblas_get_num_threads{self.suffix}")
                self.set = getattr(library, f"scipy_openblas_set_num_threads{self.suffix}")
                self.get.restype, self.set.argtypes = ctypes.c_int, [ctypes.c_int]
            if self.holders == 0:
                self.own = self.get()  # whatever the process set meanwhile
                if self.own != 1:
                    self.set(1)
            self.holders += 1

    def leave(self) -> None:
        with self.lock:
            self.holders -= 1
            if self.holders == 0 and self.own != 1:  # numpy's and scipy's own calls find OpenBLAS as it was
                self.set(self.own)


_GATE = _Gate(_library, "64_")
# scipy's OpenBLAS, which its LAPACK calls: held at one thread for an execution whose LAPACK
# matrices are all small (`Executable`); at two, a 512 x 64 SVD's BLAS threads fought the
# native pool's spinning helper (2.3 ms, 4.1 after a program that used the pool; 1.4 at one
# thread), while a 2048 x 2048 Cholesky gains from them (27 ms, 37 at one thread)
_LAPACK_GATE = _Gate(scipy_library, "")


class OneThread:
    """A reusable context: within it, with `blas`, OpenBLAS runs every GEMM on the calling
    thread, and with `lapack` (where scipy ships its OpenBLAS) so does scipy's LAPACK its BLAS.
    An executable keeps one and enters it on each call: made per call, with contextlib's
    generator, it took 2.2 us of Python a call (3.4 with LAPACK), more than its library calls;
    an execution calling LAPACK alone leaves numpy's OpenBLAS as it is."""

    def __init__(self, blas: bool = True, lapack: bool = False):
        self.gates = ([_GATE] if blas else []) + ([_LAPACK_GATE] if lapack and scipy_library() is not None else [])

    def __enter__(self) -> None:
        for gate in self.gates:
            gate.enter()

    def __exit__(self, *exception) -> None:
        for gate in self.gates:
            gate.leave()


def one_thread(blas: bool = True, lapack: bool = False) -> OneThread:
    return OneThread(blas, lapack)
