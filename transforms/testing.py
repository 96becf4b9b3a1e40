"""Passes that exist to test the pipeline machinery, never used by a real pipeline."""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.mlir import ir

from .pass_base import ModulePass


@dataclass(frozen=True)
class BreakInvariantsPass(ModulePass):
    """Breaks the module on purpose: the first xhlo op with a tensor result gets a layout that
    is not a permutation. The invariant checker must catch it and name this pass."""

    name: ClassVar[str] = "test-break-invariants"
    summary: ClassVar[str] = "[testing] corrupts the first xhlo op's result layout"

    def run(self, module: ir.Module) -> bool:
        found = []

        def visit(op):
            if op.name.startswith("xhlo.") and len(op.results) == 1 and isinstance(op.results[0].type, ir.RankedTensorType):
                found.append(op.operation)
                return ir.WalkResult.INTERRUPT
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
        if not found:
            return False
        rank = ir.RankedTensorType(found[0].results[0].type).rank
        found[0].attributes["result_layouts"] = ir.ArrayAttr.get([ir.DenseI64ArrayAttr.get([0] * (rank + 1))])
        return True
