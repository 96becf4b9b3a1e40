"""A convolution whose window is reversed is the same convolution over its kernel reversed
along those spatial dimensions (StableHLO's `window_reversal` flips the window, which walks
the kernel's spatial dimensions). The rewrite leaves every backend one plain reverse op: the
CPU backend's generated loops computed a grouped (depthwise) convolution with a reversed
window wrongly.
"""

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.mlir import ir

from .common import NO_MATCH


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
