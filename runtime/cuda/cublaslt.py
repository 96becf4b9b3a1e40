"""GEMMs as cuBLASLt matmuls, through ctypes over `libcublasLt.so*` of the `nvidia-cublas`
package found on `sys.path` (else the system's).

`Matmul` is what a plan's `gemm` thunk asks for, row-major: out[b] = epilogue(op(lhs[b]) @
op(rhs[b]) + bias) for b < batch. cuBLASLt is column-major, so the call computes the
transpose: out^T = op(rhs)^T @ op(lhs)^T, with A = rhs, B = lhs and D = out read as
column-major n x m matrices; the bias then runs along D's rows, which are the row-major
result's last dimension, as a bias broadcast along it wants. Descriptors, layouts and the
heuristic's algorithm are made once per distinct `Matmul` (`prepare`), before any capture;
the heuristic is told how far the pointers are aligned (slices inside the slab may be aligned
to less than the 256 bytes it assumes otherwise).
"""

import ctypes
import ctypes.util
import glob
import os
import sys
from dataclasses import dataclass

# cudaDataType_t, cublasComputeType_t, cublasLtEpilogue_t and attribute numbers (cublasLt.h)
DATA_TYPES = {"float32": 0, "float64": 1, "bfloat16": 14}
COMPUTE_TYPES = {"32F": 68, "32F_FAST_TF32": 77, "64F": 70}
SCALE_TYPES = {"32F": 0, "32F_FAST_TF32": 0, "64F": 1}
EPILOGUES = {"default": 1, "relu": 2, "bias": 4, "bias_relu": 6, "gelu": 32, "bias_gelu": 36}
OP_N, OP_T = 0, 1
DESC_TRANSA, DESC_TRANSB, DESC_EPILOGUE, DESC_BIAS_POINTER = 3, 4, 7, 8
LAYOUT_BATCH_COUNT, LAYOUT_STRIDED_BATCH_OFFSET = 5, 6
PREFERENCE_MAX_WORKSPACE_BYTES = 1
PREFERENCE_MIN_ALIGNMENTS = (5, 6, 7, 8)  # of A, B, C and D, in bytes
WORKSPACE_BYTES = 32 * 1024 * 1024  # what cuBLAS asks for on Hopper


@dataclass(frozen=True)
class Matmul:
    """One GEMM as the plan describes it (row-major; see the module docstring)."""

    operand_dtype: str  # float32 | float64 | bfloat16
    out_dtype: str
    compute: str  # 32F | 32F_FAST_TF32 | 64F
    m: int
    n: int
    k: int
    batch: int = 1
    transpose_lhs: bool = False
    transpose_rhs: bool = False
    epilogue: str = "default"  # default | bias | relu | bias_relu | gelu | bias_gelu
    alignment: int = 256  # bytes every pointer is aligned to (cuBLASLt's heuristic assumes 256 unless told)

    @property
    def has_bias(self) -> bool:
        return self.epilogue.startswith("bias")

    def column_major(self) -> dict:
        """The cuBLASLt view: A = rhs, B = lhs, D = out (n x m), each stored matrix's rows,
        columns and leading dimension, and the operations."""
        m, n, k = self.m, self.n, self.k
        a = (k, n, k) if self.transpose_rhs else (n, k, n)
        b = (m, k, m) if self.transpose_lhs else (k, m, k)
        return {"transa": OP_T if self.transpose_rhs else OP_N, "transb": OP_T if self.transpose_lhs else OP_N,
                "a": a, "b": b, "d": (n, m, n), "strides": (k * n, m * k, m * n)}


class CublasLtError(RuntimeError):
    """A cuBLASLt call failed."""


class HeuristicResult(ctypes.Structure):
    _fields_ = [("algo", ctypes.c_uint64 * 8), ("workspace_size", ctypes.c_size_t), ("state", ctypes.c_int),
                ("waves_count", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


def find_cublaslt() -> str | None:
    found = []
    for entry in sys.path:
        found += sorted(glob.glob(os.path.join(entry, "nvidia", "**", "libcublasLt.so*"), recursive=True))
    return found[0] if found else ctypes.util.find_library("cublasLt")


@dataclass
class Prepared:
    description: ctypes.c_void_p
    layouts: tuple  # A, B, D
    algorithm: HeuristicResult
    alpha: object
    beta: object


class CublasLt:
    """A cuBLASLt handle, its workspace (allocated by `allocate`, the device's) and the
    prepared matmuls."""

    def __init__(self, allocate):
        path = find_cublaslt()
        if path is None:
            raise CublasLtError("no cuBLASLt library (libcublasLt.so) found: install nvidia-cublas")
        self.library = ctypes.CDLL(path)
        self.handle = ctypes.c_void_p()
        self.check(self.library.cublasLtCreate(ctypes.byref(self.handle)), "cublasLtCreate")
        self.workspace = allocate(WORKSPACE_BYTES)
        self.prepared: dict[Matmul, Prepared] = {}

    def check(self, status: int, call: str) -> None:
        if status != 0:
            raise CublasLtError(f"{call} failed with cuBLAS status {status}")

    def set_attribute(self, setter, target, attribute: int, value) -> None:
        self.check(setter(target, attribute, ctypes.byref(value), ctypes.c_size_t(ctypes.sizeof(value))), setter.__name__)

    def layout(self, dtype: str, rows: int, columns: int, leading: int, matmul: Matmul, stride: int):
        layout = ctypes.c_void_p()
        self.check(self.library.cublasLtMatrixLayoutCreate(ctypes.byref(layout), DATA_TYPES[dtype], ctypes.c_uint64(rows),
                                                           ctypes.c_uint64(columns), ctypes.c_int64(leading)),
                   "cublasLtMatrixLayoutCreate")
        if matmul.batch > 1:
            setter = self.library.cublasLtMatrixLayoutSetAttribute
            self.set_attribute(setter, layout, LAYOUT_BATCH_COUNT, ctypes.c_int32(matmul.batch))
            self.set_attribute(setter, layout, LAYOUT_STRIDED_BATCH_OFFSET, ctypes.c_int64(stride))
        return layout

    def prepare(self, matmul: Matmul) -> Prepared:
        if matmul in self.prepared:
            return self.prepared[matmul]
        view = matmul.column_major()
        description = ctypes.c_void_p()
        self.check(self.library.cublasLtMatmulDescCreate(ctypes.byref(description), COMPUTE_TYPES[matmul.compute],
                                                         SCALE_TYPES[matmul.compute]), "cublasLtMatmulDescCreate")
        setter = self.library.cublasLtMatmulDescSetAttribute
        self.set_attribute(setter, description, DESC_TRANSA, ctypes.c_int32(view["transa"]))
        self.set_attribute(setter, description, DESC_TRANSB, ctypes.c_int32(view["transb"]))
        self.set_attribute(setter, description, DESC_EPILOGUE, ctypes.c_int32(EPILOGUES[matmul.epilogue]))
        a_stride, b_stride, d_stride = view["strides"]
        layouts = (self.layout(matmul.operand_dtype, *view["a"], matmul, a_stride),
                   self.layout(matmul.operand_dtype, *view["b"], matmul, b_stride),
                   self.layout(matmul.out_dtype, *view["d"], matmul, d_stride))
        preference = ctypes.c_void_p()
        self.check(self.library.cublasLtMatmulPreferenceCreate(ctypes.byref(preference)), "cublasLtMatmulPreferenceCreate")
        preferring = self.library.cublasLtMatmulPreferenceSetAttribute
        self.set_attribute(preferring, preference, PREFERENCE_MAX_WORKSPACE_BYTES, ctypes.c_uint64(WORKSPACE_BYTES))
        for attribute in PREFERENCE_MIN_ALIGNMENTS:
            self.set_attribute(preferring, preference, attribute, ctypes.c_uint32(matmul.alignment))
        result, count = HeuristicResult(), ctypes.c_int()
        self.check(self.library.cublasLtMatmulAlgoGetHeuristic(self.handle, description, layouts[0], layouts[1], layouts[2],
                                                               layouts[2], preference, 1, ctypes.byref(result), ctypes.byref(count)),
                   "cublasLtMatmulAlgoGetHeuristic")
        self.library.cublasLtMatmulPreferenceDestroy(preference)
        if count.value == 0:
            raise CublasLtError(f"cuBLASLt has no algorithm for {matmul}")
        scalar = ctypes.c_double if matmul.compute == "64F" else ctypes.c_float
        prepared = Prepared(description, layouts, result, scalar(1.0), scalar(0.0))
        self.prepared[matmul] = prepared
        return prepared

    def run(self, matmul: Matmul, lhs: int, rhs: int, out: int, bias: int | None, stream) -> None:
        prepared = self.prepare(matmul)
        if matmul.has_bias:
            self.set_attribute(self.library.cublasLtMatmulDescSetAttribute, prepared.description, DESC_BIAS_POINTER,
                               ctypes.c_uint64(bias))
        a, b, d = prepared.layouts
        self.check(self.library.cublasLtMatmul(
            self.handle, prepared.description, ctypes.byref(prepared.alpha), ctypes.c_void_p(rhs), a, ctypes.c_void_p(lhs), b,
            ctypes.byref(prepared.beta), ctypes.c_void_p(out), d, ctypes.c_void_p(out), d, ctypes.byref(prepared.algorithm.algo),
            ctypes.c_void_p(self.workspace), ctypes.c_size_t(WORKSPACE_BYTES), stream), f"cublasLtMatmul {matmul}")
