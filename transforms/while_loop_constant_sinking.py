"""xhlo-while-loop-constant-sinking: a loop reads the constants it uses from its own body
(XLA's WhileLoopConstantSinking, broadcasts of constants included).

XLA's loop body is a computation of its own: the rotation amounts of jax's threefry inside a
loop (`random.gamma`'s rejection loop draws new bits every step) are broadcasts of constants
in the body, and fusion folds each into the kernel reading it as the number it is. Our body
is a region, and MLIR's CSE shares an op of the body with an equal one before the loop: the
body then reads each rotation amount, broadcast to 65536x2, from a 512 KiB array made before
the loop. gamma's threefry kernel loaded twelve such arrays per element and ran scalar, at
3.5 ms a step. This pass, run after simplification (whose CSE would share them again),
recomputes in each loop region the values it reads from outside that cost nothing to
recompute: scalar and splat constants, iotas, and broadcasts, reshapes and converts of
those. A large constant is read-only memory either way and stays where it is. Changed: any
value recomputed in a loop.
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.ir_queries import defining_op, is_inside, ops_named
from mlirxla.mlir import ir

from .fusion_legality import is_splat_constant
from .pass_base import ModulePass, PassResult

DERIVED = ("xhlo.broadcast", "xhlo.reshape", "xhlo.convert", "xhlo.iota")


def recomputable(op: ir.Operation | None) -> bool:
    """Whether `op` computes its value from nothing: a scalar or splat constant, an iota, or
    a broadcast, reshape or convert of such a value."""
    if op is None:
        return False
    if op.name == "xhlo.constant":
        return is_splat_constant(op)
    return op.name in DERIVED and all(recomputable(defining_op(operand)) for operand in op.operands)


def recompute_in(anchor: ir.Operation, value: ir.Value, copies: dict[ir.Value, ir.Value]) -> ir.Value:
    """`value`'s computation cloned before `anchor`, the first op of a loop region (once per
    region: `copies`)."""
    if value not in copies:
        op = defining_op(value)
        operands = [recompute_in(anchor, operand, copies) for operand in op.operands]
        clone = op.clone(ir.InsertionPoint(anchor))
        for index, operand in enumerate(operands):
            clone.operands[index] = operand
        copies[value] = clone.results[0]
    return copies[value]


def sink_into(loop: ir.Operation) -> int:
    """Recompute in `loop`'s condition and body what they read from outside and costs nothing
    to recompute; the number of values recomputed."""
    sunk = 0
    for region in loop.regions:
        block = region.blocks[0]
        anchor = block.operations[0].operation
        copies: dict[ir.Value, ir.Value] = {}
        uses = []

        def collect(op, loop=loop, uses=uses):
            for index, operand in enumerate(op.operands):
                producer = defining_op(operand)
                if producer is not None and not is_inside(producer, loop) and recomputable(producer):
                    uses.append((op, index))
            return ir.WalkResult.ADVANCE

        for op in block.operations:
            op.operation.walk(collect)
        for user, index in uses:
            value = user.operands[index]
            sunk += value not in copies
            user.operands[index] = recompute_in(anchor, value, copies)
    return sunk


@dataclass(frozen=True)
class WhileLoopConstantSinkingPass(ModulePass):
    """Recomputes in each loop the constants and broadcasts of constants it reads from outside."""

    name: ClassVar[str] = "xhlo-while-loop-constant-sinking"
    summary: ClassVar[str] = "while-loop constant sinking: loops recompute the constant-like values they read"

    def run(self, module: ir.Module) -> PassResult:
        return PassResult(sum(sink_into(loop) for loop in ops_named(module, "xhlo.while")) > 0)
