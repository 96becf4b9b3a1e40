"""The xhlo dialect: XLA's HLO as MLIR ops defined in Python (IRDL underneath).

Its names are imported on first use: defining the ops takes about 0.1 s, which a process that
only loads cached executables and runs them (and imports `xhlo.sharding` and the like) never
needs. The dialect is whole only once `ops` is imported (each op registers as it is defined),
so every name here comes with it.
"""

import importlib

__all__ = ["RESULT_LAYOUTS", "SHARDING", "Xhlo", "XhloOp", "ops"]


def __getattr__(name: str):
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    ops = importlib.import_module(".ops", __name__)
    value = ops if name == "ops" else getattr(importlib.import_module(".dialect", __name__), name)
    globals()[name] = value
    return value
