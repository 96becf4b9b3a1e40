"""xhlo-copy-removal: remove copies that became unnecessary (XLA's AlgebraicSimplifier copy
folding and CopyInsertion's RemoveUnnecessaryCopies, in their simple forms).

A copy is removed, its uses reading its operand instead, when its result has the layout its
operand has (no layout change) and the copy is not one correctness needs: its operand is not
a parameter or constant, and either the copy is the operand's only use (nothing else could
read a buffer the copy's users write) or no user of the copy writes or shares its buffer (in-
place ops, while loops, returns). A copy of a copy with the same layout collapses the same
way. Changed: any copy removed.
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir

from .copy_insertion import is_constant, is_parameter
from .erasure import erase, live_ops
from .layout_assignment import layout_of
from .pass_base import ModulePass

BUFFER_SHARING_USERS = frozenset({"xhlo.dynamic_update_slice", "xhlo.scatter", "xhlo.while", "func.return", "xhlo.return"})


def removable(copy: ir.Operation) -> bool:
    source, result = copy.operands[0], copy.results[0]
    if layout_of(source) != layout_of(result):
        return False
    if is_parameter(source) or is_constant(source) or isinstance(source.owner, ir.Block):
        return False
    if sum(1 for _ in source.uses) == 1:
        return True
    return all(use.owner.name not in BUFFER_SHARING_USERS for use in result.uses)


@dataclass(frozen=True)
class CopyRemovalPass(ModulePass):
    """Removes copies that change no layout and protect no buffer."""

    name: ClassVar[str] = "xhlo-copy-removal"
    summary: ClassVar[str] = "copy removal: drop copies that keep the layout and that correctness does not need"

    def run(self, module: ir.Module) -> bool:
        changed = True
        removed = False
        while changed:
            changed = False
            for copy in live_ops(ops_named(module, "xhlo.copy")):
                if removable(copy):
                    copy.results[0].replace_all_uses_with(copy.operands[0])
                    erase(copy)
                    changed = removed = True
        return removed
