"""The BLAS library calls run on: the OpenBLAS that numpy ships (its `cblas_?gemm` with 64-bit
integers, under the `scipy_` prefix), called through ctypes on raw pointers into the buffers,
so a GEMM writes its result in place into a slice of the slab or an output, as XLA:CPU's
library thunks do. ctypes releases the GIL for the call.
"""

import ctypes
import glob
import os

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
