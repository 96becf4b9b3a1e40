"""Rewriting helpers the passes share."""

from mlirxla.mlir import ir

from .erasure import erase


def splice_block(block: ir.Block, op: ir.Operation) -> None:
    """Replace `op` by the body of `block`: the block's arguments become `op`'s operands, its
    ops move in front of `op`, and its terminator's operands replace `op`'s results."""
    for argument, operand in zip(block.arguments, op.operands):
        argument.replace_all_uses_with(operand)
    operations = list(block.operations)
    for inner in operations[:-1]:
        inner.move_before(op)
    for result, value in zip(op.results, operations[-1].operands):
        result.replace_all_uses_with(value)
    erase(op)
