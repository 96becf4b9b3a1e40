"""A convolution whose window is reversed is the same convolution over its kernel reversed
along those spatial dimensions (StableHLO's `window_reversal` flips the window, which walks
the kernel's spatial dimensions). The rewrite leaves every backend one plain reverse op: the
CPU backend's generated loops computed a grouped (depthwise) convolution with a reversed
window wrongly.

A convolution or dot with an operand of no elements sums no products: its result is zeros
(XLA's zero-element rule). A weight gradient over an empty input (jax's
`testConvGeneralDilatedGrad` with a spatial size of 0 and two batch groups) had no kernel
lowering and went to the reference interpreter, which aborted the process on it.
"""

from mlirxla.dialects.xhlo.builder import create_op, dense_splat
from mlirxla.dialects.xhlo.types import element_of, shape_of
from mlirxla.mlir import ir

from .common import NO_MATCH, broadcast


def reverse_window_into_kernel(op: ir.Operation, options):
    """convolution(x, k, window_reversal) -> convolution(x, reverse(k, reversed spatial dims))."""
    if "window_reversal" not in op.attributes:
        return NO_MATCH
    reversal = list(ir.DenseBoolArrayAttr(op.attributes["window_reversal"]))
    numbers = ir.DictAttr(op.attributes["dimension_numbers"])
    spatial = list(ir.DenseI64ArrayAttr(numbers["kernel_spatial_dimensions"]))
    reversed_dimensions = [dimension for dimension, flipped in zip(spatial, reversal) if flipped]
    kernel = op.operands[1]
    if reversed_dimensions:
        kernel = create_op("xhlo.reverse", [kernel], [kernel.type],
                           {"dimensions": ir.DenseI64ArrayAttr.get(reversed_dimensions)}).results[0]
    attributes = {name: op.attributes[name] for name in op.attributes if name != "window_reversal"}
    return create_op("xhlo.convolution", [op.operands[0], kernel], [op.results[0].type], attributes).results[0]


def zeros_for_an_empty_operand(op: ir.Operation, options):
    """convolution(x, k) or dot(x, y) with an operand of no elements -> broadcast(0)."""
    if all(0 not in shape_of(operand.type) for operand in op.operands) or 0 in shape_of(op.results[0].type):
        return NO_MATCH
    scalar = ir.RankedTensorType.get([], element_of(op.results[0].type))
    zero = create_op("xhlo.constant", [], [scalar], {"value": dense_splat(0, scalar)}, op.location).results[0]
    return broadcast(zero, [], op.results[0].type, op.location)
