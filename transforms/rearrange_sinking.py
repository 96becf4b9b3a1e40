"""What `xhlo-reshape-sinking` and `xhlo-transpose-sinking` share: XLA's ReshapeMover moves
both kinds of "rearrange" (reshapes and transposes) below elementwise ops, and so do they.

The walk over the fusible blocks; a rearrange of a rearrange of its kind folded into one;
an elementwise op whose operands allow it (the pass's `sunk_form`) rebuilt below their
rearranges when a rearrange (which then folds with the one sunk) or an elementwise op (which
may sink it further) reads it; and the rearranges, broadcasts and constants left without
users erased. An op carrying a sharding (written for its own shape) stays.
"""

import abc
from dataclasses import dataclass
from typing import ClassVar

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.ir_queries import defining_op
from mlirxla.mlir import ir

from .erasure import erase, live_ops
from .fusion_legality import ELEMENTWISE, kind_of
from .pass_base import ModulePass
from .priority_fusion import fusible_blocks
from .sharding_remover import SHARDING


def erase_unused(ops) -> None:
    """Erase those of `ops` (an op may come twice: `x * x`) that are reshapes, transposes,
    broadcasts or constants without users."""
    for op in dict.fromkeys(op for op in ops if op is not None):
        if kind_of(op) in ("reshape", "transpose", "broadcast", "constant") and all(not list(r.uses) for r in op.results):
            erase(op)


def rebuild_below(op: ir.Operation, operand, shape: list[int], back) -> None:
    """Rebuild elementwise `op` over `operand(value)` of each of its operands, with a result
    of `shape`, then `back(computed, old type)` (the rearrange to its old form) in its place;
    the rearranges, broadcasts and constants it read are erased when left unused."""
    result = op.results[0]
    old_operands = list(op.operands)
    with ir.InsertionPoint(op):
        operands = [operand(value) for value in old_operands]
        result_type = ir.RankedTensorType.get(shape, ir.RankedTensorType(result.type).element_type)
        attributes = {name: op.attributes[name] for name in op.attributes}
        computed = create_op(op.name, operands, [result_type], attributes, op.location).results[0]
        rearranged = back(computed, result.type)
    result.replace_all_uses_with(rearranged)
    erase(op)
    erase_unused(defining_op(value) for value in old_operands)


def replace_folded(op: ir.Operation, folded) -> None:
    """Replace rearrange `op` of a rearrange by `folded(inner)` (built in `op`'s place: one
    rearrange of the inner one's operand, or that operand), erasing the inner one when unused."""
    inner = defining_op(op.operands[0])
    with ir.InsertionPoint(op):
        replacement = folded(inner)
    op.results[0].replace_all_uses_with(replacement)
    erase(op)
    erase_unused([inner])


@dataclass(frozen=True)
class RearrangeSinkingPass(ModulePass):
    """Sinks elementwise ops below their operands' rearranges, folding the rearranges that meet."""

    rearrange: ClassVar[str] = ""  # the kind of op moved: "reshape" or "transpose"

    def run(self, module: ir.Module) -> bool:
        changed = False
        with module.context, ir.Location.unknown():
            for block in fusible_blocks(module):
                for op in live_ops(block.operations):
                    changed = self.visit(op) or changed
        return changed

    def visit(self, op: ir.Operation) -> bool:
        kind = kind_of(op)
        if kind == self.rearrange:
            inner = defining_op(op.operands[0])
            if inner is not None and kind_of(inner) == self.rearrange:
                self.fold(op)
                return True
            return False
        if kind in ELEMENTWISE and len(op.results) == 1 and SHARDING not in op.attributes and self.read_by_a_rearrange_or_elementwise(op):
            form = self.sunk_form(op)
            if form is not None:
                self.sink(op, form)
                return True
        return False

    def read_by_a_rearrange_or_elementwise(self, op: ir.Operation) -> bool:
        return any(kind_of(use.owner.operation) == self.rearrange or kind_of(use.owner.operation) in ELEMENTWISE
                   for use in op.results[0].uses)

    @staticmethod
    @abc.abstractmethod
    def fold(op: ir.Operation) -> None:
        """Replace rearrange `op` of a rearrange by one rearrange of the first's operand (or
        that operand)."""

    @staticmethod
    @abc.abstractmethod
    def sunk_form(op: ir.Operation):
        """What elementwise `op` computes in below its operands' rearranges (a shape, a
        permutation), or None where it does not sink."""

    @staticmethod
    @abc.abstractmethod
    def sink(op: ir.Operation, form) -> None:
        """Rebuild `op` in `form`, the rearrange back to its own after it."""
