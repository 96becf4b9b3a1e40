"""Dot strength reduction for the degenerate case (XLA's, cut down to what stays exact).

A dot whose contracting dimensions all have size 1 (or that has none) sums one product per
result element, so it is a multiply of the two operands broadcast to the result shape.
Only for integers: a float dot adds its product to a zero accumulator, which turns a -0.0
product into +0.0, where the multiply keeps -0.0.
"""

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.dialects.xhlo.types import element_of, ints, shape_of
from mlirxla.mlir import ir

from .common import NO_MATCH, broadcast, is_integer, reshape


def _dimension_numbers(op: ir.Operation) -> dict[str, list[int]]:
    numbers = ir.DictAttr(op.attributes["dot_dimension_numbers"])
    keys = ("lhs_batching_dimensions", "rhs_batching_dimensions", "lhs_contracting_dimensions", "rhs_contracting_dimensions")
    return {key: ints(numbers[key]) if key in numbers else [] for key in keys}


def fold_dot_unit_contraction(op: ir.Operation, options):
    """dot(a, b) with every contracting size 1 -> broadcast(reshape(a)) * broadcast(reshape(b)), integers only."""
    if not options.enable_dot_strength_reduction:
        return NO_MATCH
    lhs, rhs = op.operands
    element = element_of(op.result.type)
    if not is_integer(element) or str(element_of(lhs.type)) != str(element) or str(element_of(rhs.type)) != str(element):
        return NO_MATCH
    numbers = _dimension_numbers(op)
    lhs_shape, rhs_shape = shape_of(lhs.type), shape_of(rhs.type)
    if any(lhs_shape[d] != 1 for d in numbers["lhs_contracting_dimensions"]):
        return NO_MATCH
    batch = len(numbers["lhs_batching_dimensions"])
    lhs_kept = [d for d in range(len(lhs_shape)) if d not in numbers["lhs_contracting_dimensions"]]
    rhs_kept = [d for d in range(len(rhs_shape)) if d not in numbers["rhs_contracting_dimensions"]]
    lhs_free = [d for d in lhs_kept if d not in numbers["lhs_batching_dimensions"]]
    rhs_free = [d for d in rhs_kept if d not in numbers["rhs_batching_dimensions"]]

    # result dimensions: batch..., lhs free..., rhs free...
    def lhs_position(d):
        if d in numbers["lhs_batching_dimensions"]:
            return numbers["lhs_batching_dimensions"].index(d)
        return batch + lhs_free.index(d)

    def rhs_position(d):
        if d in numbers["rhs_batching_dimensions"]:
            return numbers["rhs_batching_dimensions"].index(d)
        return batch + len(lhs_free) + rhs_free.index(d)

    location = op.location
    a = reshape(lhs, [lhs_shape[d] for d in lhs_kept], location)
    b = reshape(rhs, [rhs_shape[d] for d in rhs_kept], location)
    a = broadcast(a, [lhs_position(d) for d in lhs_kept], op.result.type, location)
    b = broadcast(b, [rhs_position(d) for d in rhs_kept], op.result.type, location)
    return create_op("xhlo.multiply", [a, b], [op.result.type], {}, location).results[0]
