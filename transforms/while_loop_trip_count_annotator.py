"""xhlo-while-loop-trip-count-annotator: each loop whose trip count is known at compile time
carries it as `known_trip_count` (XLA's WhileLoopTripCountAnnotator, which writes it into the
while's backend config).

The count is proved from the loop's induction variable (`while_loop_simplifier.trip_count`:
jax's `fori_loop` and `scan` compare a carried integer started at a constant with a constant
bound, the body adding a constant step). It is read here, before fusion moves the condition's
compare into a fusion and before copy insertion, and kept on the op for the thunk emitter: a
`while` thunk with a known count runs its body that many times without its condition, which
on a GPU is no predicate read back to the host per iteration, and a loop a CUDA graph can
record (XLA:GPU's known-trip-count while thunks). A condition with a side effect (a callback
in jax's cond_fun) keeps its loop unannotated, so that it runs each iteration. Changed: any
loop annotated anew.
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir

from .pass_base import ModulePass
from .dead_code_elimination import holds_side_effect
from .while_loop_simplifier import cond_block, trip_count

ATTRIBUTE = "known_trip_count"


def annotate(loop: ir.Operation) -> bool:
    if ATTRIBUTE in loop.attributes or not condition_is_pure(loop):
        return False
    count = trip_count(loop)
    if count is None:
        return False
    loop.attributes[ATTRIBUTE] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), count)
    return True


def condition_is_pure(loop: ir.Operation) -> bool:
    """Whether the condition only computes its predicate: one with a side effect (a callback
    in jax's cond_fun) must run each iteration, so its loop keeps it."""
    return not any(holds_side_effect(op.operation) for op in cond_block(loop).operations)


def known_trip_count(loop: ir.Operation) -> int | None:
    """The count the annotator wrote on `loop`, or None."""
    return ir.IntegerAttr(loop.attributes[ATTRIBUTE]).value if ATTRIBUTE in loop.attributes else None


@dataclass(frozen=True)
class WhileLoopTripCountAnnotatorPass(ModulePass):
    """Writes each loop's trip count on it when the induction variable proves it."""

    name: ClassVar[str] = "xhlo-while-loop-trip-count-annotator"
    summary: ClassVar[str] = "while-loop trip-count annotator: loops with a proved trip count carry it"

    def run(self, module: ir.Module) -> bool:
        return sum(annotate(loop) for loop in ops_named(module, "xhlo.while")) > 0
