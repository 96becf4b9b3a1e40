"""Native drivers: an executable's thunk sequence, or a while loop or a conditional in it, run
by one compiled function instead of the Python walk of its thunks
(`backends/cpu/driver_emitter.py` writes them).

A driver is `i32 driver(i64 *bases, i64 *imports)`: it reads its buffers' addresses from the
execution's address table, calls the kernels directly (they are in the same object), GEMMs
through the BLAS function the runtime puts in `imports` (OpenBLAS's, or the GEMM in parts
over the native pool), copies with memmove, reads
predicates and selectors from their buffers, and loops or branches in native code, so an
iteration costs its kernels and not a Python round trip per thunk. A thunk it does not run
itself (a host call, a collective, a grid's sliced kernel) it hands back to Python through the first import, a callback `i32 (i64 index)` that runs
the `index`th of its `python_thunks` and returns non-zero when that raised: the driver then
returns at once, and the error is raised from the call that ran the driver.

What the callback needs (the address table as a list, the pool) is per thread: a driver
runs its callbacks on the thread that called it, and the thunks called back are leaves (no
driver runs inside them).

While a profile records (`thunks.observe`), control flow runs as the Python walk, so that
every thunk inside is timed on its own.
"""

import ctypes
import threading
from dataclasses import dataclass, field

from mlirxla.errors import MlirxlaError

from . import blas, lapack_batches, native_pool
from .ctypes_arrays import int64_table

PYTHON = "python"  # the import that calls back into Python
GEMMS = {"cblas_sgemm": "f32", "cblas_dgemm": "f64"}  # import -> the BLAS GEMM's element type
POOLED_GEMMS = {"mlirxla_gemm_f32": "f32", "mlirxla_gemm_f64": "f64"}  # import -> the GEMM in parts' element type
POOLED_GEMM_BATCHES = {"mlirxla_gemm_batch_f32": "f32", "mlirxla_gemm_batch_f64": "f64"}  # and a batch of them
POOL, POOL_RUN = "mlirxla_pool", "mlirxla_pool_run"  # the native pool's words, and its run function
LAPACK_PREFIX = "lapack:"  # "lapack:sgetrf": scipy's LAPACK or BLAS routine of that name

_CALLBACK_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64)


class _Calling(threading.local):
    thunks: list = []  # the running driver's thunks called back, by index
    bases: list = []
    pool = None
    error: BaseException | None = None


_calling = _Calling()


def _call_back(index: int) -> int:
    try:
        _calling.thunks[index].run(_calling.bases, _calling.pool)
        return 0
    except BaseException as error:  # raised again by `NativeDriver.run` once the driver returned
        _calling.error = error
        return 1


_CALLBACK = _CALLBACK_TYPE(_call_back)
_CALLBACK_ADDRESS = ctypes.cast(_CALLBACK, ctypes.c_void_p).value


def import_address(name: str) -> int:
    if name == PYTHON:
        return _CALLBACK_ADDRESS
    if name in GEMMS:
        return ctypes.cast(blas.gemm(GEMMS[name]), ctypes.c_void_p).value
    if name in POOLED_GEMMS:
        return native_pool.shared().gemms[POOLED_GEMMS[name]]
    if name in POOLED_GEMM_BATCHES:
        return native_pool.shared().gemm_batches[POOLED_GEMM_BATCHES[name]]
    if name == POOL:
        return native_pool.shared().address
    if name == POOL_RUN:
        return native_pool.shared().run_address
    if name.startswith(LAPACK_PREFIX):
        return lapack_batches.routine_address(name[len(LAPACK_PREFIX):])
    raise MlirxlaError(f"a native driver imports '{name}', which the runtime does not provide")


@dataclass
class NativeDriver:
    """The compiled function that runs a thunk sequence or one control-flow thunk: its symbol,
    the functions it calls through pointers (`imports`), which of the thunks it runs
    (positions in `thunks.every_thunk` order of what it runs: the sequence, or the
    control-flow thunk itself at 0) it calls back into Python, and why each of those is not
    native."""

    symbol: str
    imports: tuple[str, ...]
    python_thunks: tuple[int, ...] = ()
    python_reasons: tuple[str, ...] = ()
    function: object = field(default=None, repr=False, compare=False)
    imported: object = field(default=None, repr=False, compare=False)
    called_back: list = field(default_factory=list, repr=False, compare=False)

    def bind(self, engine, walk: list) -> None:
        """Bind to the loaded code; `walk` is the owner's `every_thunk` order."""
        self.function = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)(engine.address(self.symbol))
        self.imported = int64_table(map(import_address, self.imports))
        self.called_back = [walk[position] for position in self.python_thunks]

    def run(self, bases: list[int], pool) -> None:
        table = int64_table(bases)
        if not self.called_back:
            self.function(table, self.imported)
            return
        saved = (_calling.thunks, _calling.bases, _calling.pool)
        _calling.thunks, _calling.bases, _calling.pool, _calling.error = self.called_back, bases, pool, None
        try:
            failed = self.function(table, self.imported)
            error = _calling.error
        finally:
            _calling.thunks, _calling.bases, _calling.pool = saved
        if failed:
            raise error

    def to_json(self) -> dict:
        return {"symbol": self.symbol, "imports": list(self.imports), "python_thunks": list(self.python_thunks),
                "python_reasons": list(self.python_reasons)}

    @classmethod
    def from_json(cls, data: dict | None) -> "NativeDriver | None":
        if data is None:
            return None
        return cls(data["symbol"], tuple(data["imports"]), tuple(data["python_thunks"]), tuple(data["python_reasons"]))

    def describe(self) -> str:
        back = f"; back into Python for {', '.join(self.python_reasons)}" if self.python_reasons else ""
        return f"native driver {self.symbol}{back}"
