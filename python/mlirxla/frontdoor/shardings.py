"""Import shardings into the xhlo sharding attribute (XLA's HloSharding text).

`mhlo.sharding` strings on functions arguments/results and on ops are already in XLA's
grammar; they are copied to `xhlo.sharding`.
"""

from mlirxla.dialects.xhlo import SHARDING
from mlirxla.mlir import ir

MHLO_SHARDING = "mhlo.sharding"


def import_shardings(module: ir.Module) -> None:
    def visit(op):
        if MHLO_SHARDING in op.attributes:
            op.attributes[SHARDING] = op.attributes[MHLO_SHARDING]
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
