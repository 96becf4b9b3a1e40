"""The xhlo dialect: XLA's HLO as MLIR ops defined in Python (IRDL underneath)."""

from . import ops
from .dialect import RESULT_LAYOUTS, SHARDING, Xhlo, XhloOp

__all__ = ["RESULT_LAYOUTS", "SHARDING", "Xhlo", "XhloOp", "ops"]
