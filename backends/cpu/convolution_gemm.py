"""Convolutions as im2col + BLAS GEMM (XLA:CPU's library convolutions do the same job with
Eigen or oneDNN).

A 2-D convolution in NHWC layout with an HWIO kernel (stride, padding, no dilation, no
groups, f32 or f64) is `im2col(input) @ kernel`: the im2col kernel lays every output
position's receptive field out as one row, [N*OH*OW, KH*KW*C] (kh, kw major, channels
minor, so the HWIO kernel read as [KH*KW*C, F] is already the GEMM's right-hand side), and
one GEMM writes the convolution's output, [N*OH*OW, F], in place. The im2col rows live in
scratch memory of their own, allocated per execution.

The emitter takes this path when the GEMM's work is large enough to beat the generated
loops (`worth_a_gemm`) and says which path each convolution took in the thunk sequence.
"""

from dataclasses import dataclass

import numpy as np

from mlirxla.mlir import ir
from mlirxla.runtime import literals

MIN_GEMM_FLOPS = 1 << 20  # below this the generated loops win (no im2col pass over memory)
MIN_DEPTH = 8  # K = KH*KW*C: a shallower GEMM streams more than it computes


@dataclass(frozen=True)
class ConvolutionShape:
    batch: int
    height: int
    width: int
    channels: int
    kernel_height: int
    kernel_width: int
    features: int
    out_height: int
    out_width: int
    strides: tuple[int, int]
    padding: tuple[tuple[int, int], tuple[int, int]]
    element: str

    @property
    def m(self) -> int:
        return self.batch * self.out_height * self.out_width

    @property
    def k(self) -> int:
        return self.kernel_height * self.kernel_width * self.channels


def _array(op: ir.Operation, name: str, default: list[int]) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes[name])) if name in op.attributes else default


def convolution_shape(op: ir.Operation) -> ConvolutionShape | None:
    """The shape of an NHWC x HWIO -> NHWC convolution BLAS can run, or None."""
    numbers = ir.DictAttr(op.attributes["dimension_numbers"])

    def number(name):
        return ir.IntegerAttr(numbers[name]).value

    def numbers_list(name):
        return list(ir.DenseI64ArrayAttr(numbers[name]))

    layout = (number("input_batch_dimension"), number("input_feature_dimension"), numbers_list("input_spatial_dimensions"),
              number("kernel_input_feature_dimension"), number("kernel_output_feature_dimension"), numbers_list("kernel_spatial_dimensions"),
              number("output_batch_dimension"), number("output_feature_dimension"), numbers_list("output_spatial_dimensions"))
    if layout != (0, 3, [1, 2], 2, 3, [0, 1], 0, 3, [1, 2]):
        return None
    groups = [ir.IntegerAttr(op.attributes[name]).value for name in ("feature_group_count", "batch_group_count")]
    if groups != [1, 1] or _array(op, "lhs_dilation", [1, 1]) != [1, 1] or _array(op, "rhs_dilation", [1, 1]) != [1, 1]:
        return None
    if "window_reversal" in op.attributes and any(ir.DenseBoolArrayAttr(op.attributes["window_reversal"])):
        return None
    element = str(ir.RankedTensorType(op.results[0].type).element_type)
    if element not in ("f32", "f64") or any(str(ir.RankedTensorType(v.type).element_type) != element for v in op.operands):
        return None
    n, h, w, c = ir.RankedTensorType(op.operands[0].type).shape
    kh, kw, _, f = ir.RankedTensorType(op.operands[1].type).shape
    _, oh, ow, _ = ir.RankedTensorType(op.results[0].type).shape
    padding = literals.to_numpy(op.attributes["padding"]).reshape(2, 2) if "padding" in op.attributes else np.zeros((2, 2), int)
    if (padding < 0).any():
        return None
    strides = tuple(_array(op, "window_strides", [1, 1]))
    return ConvolutionShape(n, h, w, c, kh, kw, f, oh, ow, strides, tuple(tuple(int(p) for p in row) for row in padding), element)


def worth_a_gemm(shape: ConvolutionShape) -> bool:
    return shape.k >= MIN_DEPTH and 2 * shape.m * shape.k * shape.features >= MIN_GEMM_FLOPS


def tensor(shape: list[int], element: str) -> str:
    return f"tensor<{'x'.join(map(str, shape))}x{element}>"


def im2col_module_text(symbol: str, shape: ConvolutionShape) -> str:
    """The im2col kernel, in destination-passing style: input memref -> rows memref."""
    s = shape
    (top, bottom), (left, right) = s.padding
    padded = [s.batch, s.height + top + bottom, s.width + left + right, s.channels]
    window = [s.batch, s.out_height, s.out_width, s.channels]
    input_type, padded_type, window_type = tensor([s.batch, s.height, s.width, s.channels], s.element), tensor(padded, s.element), tensor(window, s.element)
    rows_type = tensor([s.m, s.k], s.element)
    lines = [
        f"func.func @{symbol}(%input: {input_type.replace('tensor', 'memref')}, %rows: {rows_type.replace('tensor', 'memref')}) {{",
        f"  %x = bufferization.to_tensor %input restrict : {input_type.replace('tensor', 'memref')} to {input_type}",
        f"  %zero = stablehlo.constant dense<0.0> : tensor<{s.element}>",
        f'  %padded = "stablehlo.pad"(%x, %zero) {{edge_padding_low = array<i64: 0, {top}, {left}, 0>, '
        f"edge_padding_high = array<i64: 0, {bottom}, {right}, 0>, interior_padding = array<i64: 0, 0, 0, 0>}} "
        f": ({input_type}, tensor<{s.element}>) -> {padded_type}",
    ]
    pieces = []
    for kh in range(s.kernel_height):
        for kw in range(s.kernel_width):
            name = f"%window_{kh}_{kw}"
            limits = [s.batch, kh + (s.out_height - 1) * s.strides[0] + 1, kw + (s.out_width - 1) * s.strides[1] + 1, s.channels]
            lines.append(f'  {name} = "stablehlo.slice"(%padded) {{start_indices = array<i64: 0, {kh}, {kw}, 0>, '
                         f"limit_indices = array<i64: {', '.join(map(str, limits))}>, "
                         f"strides = array<i64: 1, {s.strides[0]}, {s.strides[1]}, 1>}} : ({padded_type}) -> {window_type}")
            pieces.append(name)
    fields_type = tensor([s.batch, s.out_height, s.out_width, s.k], s.element)
    lines += [
        f'  %fields = "stablehlo.concatenate"({", ".join(pieces)}) {{dimension = 3 : i64}} : ({", ".join([window_type] * len(pieces))}) -> {fields_type}',
        f'  %result = "stablehlo.reshape"(%fields) : ({fields_type}) -> {rows_type}',
        f"  bufferization.materialize_in_destination %result in restrict writable %rows : ({rows_type}, {rows_type.replace('tensor', 'memref')}) -> ()",
        "  return",
        "}",
    ]
    return "\n".join(lines)
