"""Dot strength reduction for the degenerate case (XLA's, cut down to what stays exact), and
transposed dots as dots with their operands swapped.

A dot whose contracting dimensions all have size 1 (or that has none) sums one product per
result element, so it is a multiply of the two operands broadcast to the result shape
(XLA's dot strength reduction), which fuses with its producers and consumers where a dot
is a kernel or a GEMM of its own (a sparse matrix times a dense one, `BCOO @ x`, scales each
gathered row by a batch dot without contraction: 10 MiB written and read again). A float
dot adds its product to a +0.0 accumulator, which turns a -0.0 product into +0.0, so for
floats the multiply is followed by an add of +0.0: the same value for every product, NaNs
and infinities included. Not for complex numbers.

A transpose that swaps a dot's lhs and rhs free dimensions (batch dimensions kept first) is
the dot of the operands the other way round, (A B)^T = B^T A^T: the same products summed in
the same order, so exact. A gradient's weight update (jax's dW = x^T g is
transpose(dot(g, x))) then is one GEMM writing the layout the program wants instead of a
GEMM and a transpose kernel that moves the result through memory once more.
"""

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.dialects.xhlo.types import dot_dimension_numbers, element_of, shape_of
from mlirxla.mlir import ir

from .common import NO_MATCH, broadcast, int_list, is_float, is_integer, produced_by, reshape, splat_constant


def fold_dot_unit_contraction(op: ir.Operation, options):
    """dot(a, b) with every contracting size 1 -> broadcast(reshape(a)) * broadcast(reshape(b)),
    + 0.0 for floats."""
    if not options.enable_dot_strength_reduction:
        return NO_MATCH
    lhs, rhs = op.operands
    element = element_of(op.result.type)
    if not (is_integer(element) or is_float(element)) or str(element_of(lhs.type)) != str(element) or str(element_of(rhs.type)) != str(element):
        return NO_MATCH
    numbers = dot_dimension_numbers(op)
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
    product = create_op("xhlo.multiply", [a, b], [op.result.type], {}, location).results[0]
    if is_integer(element):
        return product
    zero = splat_constant(ir.FloatAttr.get(element, 0.0), op.result.type, location)
    return create_op("xhlo.add", [product, zero], [op.result.type], {}, location).results[0]


def fold_transpose_of_dot(op: ir.Operation, options):
    """transpose(dot(a, b)) -> dot(b, a) when the transpose swaps the lhs and rhs free
    dimensions, keeps the batch dimensions, and is the dot's only user."""
    dot = produced_by(op.operands[0], "dot")
    if dot is None or len(list(dot.results[0].uses)) != 1:
        return NO_MATCH
    numbers = dot_dimension_numbers(dot)
    lhs, rhs = dot.operands
    batch = len(numbers["lhs_batching_dimensions"])
    lhs_free = len(shape_of(lhs.type)) - batch - len(numbers["lhs_contracting_dimensions"])
    rhs_free = len(shape_of(rhs.type)) - batch - len(numbers["rhs_contracting_dimensions"])
    swapped = list(range(batch)) + [batch + lhs_free + d for d in range(rhs_free)] + [batch + d for d in range(lhs_free)]
    if int_list(op, "permutation") != swapped or not lhs_free or not rhs_free:
        return NO_MATCH
    other = {"lhs_batching_dimensions": "rhs_batching_dimensions", "lhs_contracting_dimensions": "rhs_contracting_dimensions"}
    other |= {value: key for key, value in other.items()}
    attributes = {name: dot.attributes[name] for name in dot.attributes}
    attributes["dot_dimension_numbers"] = ir.DictAttr.get(
        {other[key]: ir.DenseI64ArrayAttr.get(values) for key, values in numbers.items() if values})
    if "precision_config" in attributes:
        attributes["precision_config"] = ir.ArrayAttr.get(list(ir.ArrayAttr(attributes["precision_config"]))[::-1])
    return create_op("xhlo.dot", [rhs, lhs], [op.result.type], attributes, op.location).results[0]
