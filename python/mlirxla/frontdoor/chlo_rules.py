"""The chlo compositions, one rule per chlo op, each written as the math it implements."""

from mlirxla.mlir import ir

from .chlo_to_xhlo import chlo_rule


@chlo_rule("tan")
def tan(b, op):
    """tan(x) is an HLO op of its own."""
    return [b.unary("tan", op.operands[0])]


@chlo_rule("is_inf")
def is_inf(b, op):
    """|x| == inf."""
    x = op.operands[0]
    return [b.compare(b.unary("abs", x), b.splat(float("inf"), x), "EQ")]
