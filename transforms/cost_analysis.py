"""What a compiled module computes and moves, counted as XLA's HloCostAnalysis counts it (what
`jax.jit(f).lower(x).compile().cost_analysis()` reports on XLA's backends), over the kernels
of an optimized xhlo module:

- `flops`: one per result element of an elementwise op that is not transcendental, two per
  multiply-add of a dot or convolution, one per combination of a reduction (the reducer's
  ops for every input element beyond the first of each result), n log2 n for a sort of n
  elements, one per result element of any other op that computes (shape ops compute
  nothing, and a custom call's work is unknown: none, as in XLA);
- `transcendentals`: one per result element of exp, log, tanh, sin, pow, sqrt, ...;
- `bytes accessed`: what each kernel (a fusion, a library call, a single op) reads from its
  operands and writes to its results, the cost model's byte sizes (`cost_model.byte_size`).

Every computation counts once, as in XLA: a loop body is not multiplied by its trip count.
Ops that are no kernel (constants, tuples, bitcasts) cost nothing.
"""

import math
from dataclasses import dataclass

from mlirxla.dialects.xhlo.types import dot_dimension_numbers
from mlirxla.mlir import ir

from .cost_model import byte_size
from .fusion_legality import ELEMENTWISE, NOT_KERNELS, SHAPE_OPS, element_count, fused_ops, kind_of

# XLA's transcendental opcodes (HloCostAnalysis::HandleElementwiseOp); divide is a flop
TRANSCENDENTAL = frozenset(
    "atan2 cbrt cosine erf exponential exponential_minus_one log log_plus_one logistic power rsqrt sine sqrt tan "
    "tanh".split()
)
CONTROL_FLOW = frozenset({"while", "conditional"})
NO_COST = NOT_KERNELS | {"return", "func.return"}


@dataclass
class Cost:
    flops: float = 0.0
    transcendentals: float = 0.0
    bytes_accessed: float = 0.0

    def add(self, other: "Cost") -> None:
        self.flops += other.flops
        self.transcendentals += other.transcendentals
        self.bytes_accessed += other.bytes_accessed

    def properties(self) -> list[tuple[str, float]]:
        """Under XLA's property names."""
        return [("flops", self.flops), ("transcendentals", self.transcendentals), ("bytes accessed", self.bytes_accessed)]


def module_cost(module: ir.Module) -> Cost:
    """The cost of every function of an optimized module (the entry and the computations its
    conditionals branch to)."""
    total = Cost()
    for function in module.body.operations:
        if function.operation.name == "func.func":
            for block in function.regions[0].blocks:
                total.add(block_cost(block))
    return total


def block_cost(block: ir.Block) -> Cost:
    total = Cost()
    for op in block.operations:
        op = op.operation
        kind = kind_of(op)
        if kind in NO_COST:
            continue
        if kind in CONTROL_FLOW:
            for region in op.regions:
                for inner in region.blocks:
                    total.add(block_cost(inner))
            continue
        total.add(kernel_cost(op))
    return total


def kernel_cost(op: ir.Operation) -> Cost:
    cost = Cost(bytes_accessed=sum(byte_size(v.type) for v in list(op.operands) + list(op.results)))
    for inner in fused_ops(op):
        flops, transcendentals = op_counts(inner)
        cost.flops += flops
        cost.transcendentals += transcendentals
    return cost


def op_counts(op: ir.Operation) -> tuple[float, float]:
    """(flops, transcendentals) of one op."""
    kind = kind_of(op)
    if not op.results or kind in SHAPE_OPS or kind in NO_COST or kind == "custom_call":
        return 0.0, 0.0
    elements = element_count(op.results[0].type)
    if kind in TRANSCENDENTAL:
        return 0.0, float(elements)
    if kind in ELEMENTWISE:
        return float(elements), 0.0
    if kind == "reduce":
        combinations = element_count(op.operands[0].type) - elements
        return float(max(combinations, 0) * region_flops(op)), 0.0
    if kind == "dot":
        return 2.0 * elements * contracted_size(op), 0.0
    if kind == "convolution":
        return convolution_flops(op), 0.0
    if kind == "sort":
        count = element_count(op.operands[0].type)
        return float(count * math.ceil(math.log2(count))) if count > 1 else 0.0, 0.0
    return float(elements), 0.0


def region_flops(op: ir.Operation) -> int:
    """The ops a reducer computes per combination (at least one)."""
    body = op.regions[0].blocks[0]
    return max(1, sum(1 for inner in body.operations if kind_of(inner.operation) in ELEMENTWISE | TRANSCENDENTAL))


def contracted_size(dot: ir.Operation) -> int:
    """The product of the lhs contracting dimensions: multiply-adds per result element."""
    shape = ir.RankedTensorType(dot.operands[0].type).shape
    return math.prod(shape[d] for d in dot_dimension_numbers(dot)["lhs_contracting_dimensions"])


def convolution_flops(convolution: ir.Operation) -> float:
    """Two per multiply-add that reads the input, not its padding, as XLA counts them: per
    (batch, output feature) pair, the input features of its group times, per spatial
    dimension, the (output position, kernel position) pairs that land on an input element."""
    numbers = ir.DictAttr(convolution.attributes["dimension_numbers"])

    def number(name: str) -> int:
        return ir.IntegerAttr(numbers[name]).value

    def dimensions(name: str) -> list[int]:
        return list(ir.DenseI64ArrayAttr(numbers[name]))

    lhs = ir.RankedTensorType(convolution.operands[0].type).shape
    kernel = ir.RankedTensorType(convolution.operands[1].type).shape
    output = ir.RankedTensorType(convolution.results[0].type).shape
    input_spatial, kernel_spatial = dimensions("input_spatial_dimensions"), dimensions("kernel_spatial_dimensions")
    output_spatial = dimensions("output_spatial_dimensions")
    rank = len(input_spatial)
    strides = integer_list(convolution, "window_strides", [1] * rank)
    lhs_dilation = integer_list(convolution, "lhs_dilation", [1] * rank)
    rhs_dilation = integer_list(convolution, "rhs_dilation", [1] * rank)
    padding = integer_list(convolution, "padding", [0] * (2 * rank))
    batch_and_features = math.prod(output) / max(math.prod(output[d] for d in output_spatial), 1)
    kernel_window = math.prod(kernel[d] for d in kernel_spatial)
    features_per_group = math.prod(kernel) / max(kernel[number("kernel_output_feature_dimension")] * kernel_window, 1)
    pairs = math.prod(
        valid_window_pairs(output[o], kernel[k], lhs[i], strides[n], padding[2 * n], lhs_dilation[n], rhs_dilation[n])
        for n, (i, k, o) in enumerate(zip(input_spatial, kernel_spatial, output_spatial)))
    return 2.0 * batch_and_features * features_per_group * pairs


def valid_window_pairs(outputs: int, window: int, inputs: int, stride: int, low_padding: int, lhs_dilation: int,
                       rhs_dilation: int) -> int:
    """(output position, window position) pairs of one dimension that read an input element."""
    last = (inputs - 1) * lhs_dilation
    count = 0
    for position in range(outputs):
        for offset in range(window):
            index = position * stride + offset * rhs_dilation - low_padding
            count += 0 <= index <= last and index % lhs_dilation == 0
    return count


def integer_list(op: ir.Operation, name: str, default: list[int]) -> list[int]:
    if name not in op.attributes:
        return default
    attribute = op.attributes[name]
    if isinstance(attribute, ir.DenseI64ArrayAttr):
        return list(attribute)
    return [int(value) for value in ir.DenseIntElementsAttr(attribute)]
