"""The xhlo ops: one class per HLO opcode that StableHLO can express, plus the HLO-only ops
(fusion, copy, bitcast) that later passes create.

Ops print in generic form (`"xhlo.add"(%a, %b) : (...) -> ...`). Attributes are builtin
attributes in the attribute dictionary: integer lists are `array<i64: ...>`, enums are
strings (`comparison_direction = "LT"`), dimension numbers are dictionaries of integer
lists. Conditional branches are computations (private functions), as in HLO; all other
region-holding ops carry their computations as regions terminated by `xhlo.return`.
"""

import os
from collections.abc import Sequence
from typing import Any, Optional

from mlirxla.mlir import ext, ir

from .dialect import Xhlo, XhloOp
from .types import (
    bit_width,
    element_of,
    int_value,
    ints,
    is_predicate,
    is_scalar_tensor,
    is_tensor,
    shape_of,
    string_value,
    tensor,
    type_list,
)

Operand = ext.Operand
Result = ext.Result
Region = ext.Region
Pure = ext.Pure
# Computations (reducers, comparators, combiners, fused bodies) see only their arguments, as in
# HLO: CSE and other region-blind rewrites may not make them capture values from outside.
ISOLATED = ir.IsIsolatedFromAboveTrait

# IRDL gives every element of a variadic group one type variable, so a variadic group can
# only hold values of one type. Lists of values of different types (while's carried values,
# a reduce's inputs) are therefore declared as numbered optional slots: `operands_0`,
# `operands_1`, ...; `operandSegmentSizes` marks which slots are filled. Every slot costs
# about 15-20 us of start-up in every process (the toolkit builds each op's Python class and
# IRDL definition field by field), so the counts are what programs need: lists of values
# (while's carried values, returns, tuples, calls, custom calls, concatenations) and the
# collectives jax emits for a pytree or the combiners build (all-reduce, all-gather) get
# `WIDE` slots, a fusion's operands and results `FUSION_SLOTS` (the fusion passes stop
# there), and the inputs of reductions, sorts, scatters, maps and other collectives `NARROW`.
SLOTS_VARIABLE = "MLIRXLA_XHLO_SLOTS"
DEFAULT_WIDE, FUSION_SLOTS, NARROW = 256, 64, 16


def wide_slot_count() -> int:
    """`WIDE`: `MLIRXLA_XHLO_SLOTS` when set (an integer of at least `FUSION_SLOTS`; a
    program with a while loop of more carried values needs it), else `DEFAULT_WIDE`. A
    value that is not such a number is ignored: the dialect must load for the tools to say
    anything, and the error that a list exceeds the slots names the variable and the count."""
    text = os.environ.get(SLOTS_VARIABLE, "").strip()
    return int(text) if text.isdigit() and int(text) >= FUSION_SLOTS else DEFAULT_WIDE


WIDE = wide_slot_count()


def slots(stem: str, kind, count: int = WIDE) -> dict:
    """Annotations for `count` optional operand or result slots named `stem_0`, `stem_1`, ..."""
    return {f"{stem}_{i}": Optional[kind[Any]] for i in range(count)}


# ---------------------------------------------------------------- elementwise


def same_shape_problem(types: list[ir.Type]) -> str | None:
    if not all(is_tensor(t) for t in types):
        return f"expects ranked tensors, got {type_list(types)}"
    shapes = {tuple(shape_of(t)) for t in types}
    if len(shapes) != 1:
        return f"operand and result shapes differ: {type_list(types)}"
    return None


def same_type_problem(types: list[ir.Type]) -> str | None:
    if is_tensor(types[0]) and all(t == types[0] for t in types[1:]):
        return None  # types are uniqued: the common case is one comparison per value
    if problem := same_shape_problem(types):
        return problem
    if len({str(element_of(t)) for t in types}) != 1:
        return f"operand and result element types differ: {type_list(types)}"
    return None


class ElementwiseOp(XhloOp):
    """An op StableHLO calls elementwise (its Elementwise and BroadcastingElementwise ops): each
    result element depends only on the operand elements at the same index. Unless an op says
    otherwise, its operands and result share one tensor type."""

    def check(self):
        return same_type_problem([v.type for v in self.operands] + [self.result.type])


class UnaryOp(ElementwiseOp):
    operand: Operand[Any]
    result: Result[Any]


class BinaryOp(ElementwiseOp):
    lhs: Operand[Any]
    rhs: Operand[Any]
    result: Result[Any]


class AbsOp(UnaryOp, name="abs", traits=[Pure]):
    """`|x|`; for complex operands the result is the real magnitude."""

    def check(self):
        return same_shape_problem([self.operand.type, self.result.type])


class CbrtOp(UnaryOp, name="cbrt", traits=[Pure]):
    """Cube root."""


class CeilOp(UnaryOp, name="ceil", traits=[Pure]):
    """Round toward +inf."""


class ClzOp(UnaryOp, name="count_leading_zeros", traits=[Pure]):
    """Leading zero bits of an integer."""


class CosineOp(UnaryOp, name="cosine", traits=[Pure]):
    """cos(x)."""


class ExpOp(UnaryOp, name="exponential", traits=[Pure]):
    """e^x."""


class Expm1Op(UnaryOp, name="exponential_minus_one", traits=[Pure]):
    """e^x - 1, accurate near 0."""


class FloorOp(UnaryOp, name="floor", traits=[Pure]):
    """Round toward -inf."""


class ImagOp(UnaryOp, name="imag", traits=[Pure]):
    """Imaginary part of a complex tensor."""

    def check(self):
        return same_shape_problem([self.operand.type, self.result.type])


class IsFiniteOp(UnaryOp, name="is_finite", traits=[Pure]):
    """True where x is neither inf nor nan."""

    def check(self):
        if not is_predicate(element_of(self.result.type)):
            return f"result must have i1 elements, got {self.result.type}"
        return same_shape_problem([self.operand.type, self.result.type])


class LogOp(UnaryOp, name="log", traits=[Pure]):
    """Natural logarithm."""


class Log1pOp(UnaryOp, name="log_plus_one", traits=[Pure]):
    """log(1 + x), accurate near 0."""


class LogisticOp(UnaryOp, name="logistic", traits=[Pure]):
    """1 / (1 + e^-x)."""


class NegateOp(UnaryOp, name="negate", traits=[Pure]):
    """-x."""


class NotOp(UnaryOp, name="not", traits=[Pure]):
    """Bitwise or logical not."""


class PopcntOp(UnaryOp, name="popcnt", traits=[Pure]):
    """Number of set bits."""


class RealOp(UnaryOp, name="real", traits=[Pure]):
    """Real part of a complex tensor."""

    def check(self):
        return same_shape_problem([self.operand.type, self.result.type])


class RoundNearestAfzOp(UnaryOp, name="round_nearest_afz", traits=[Pure]):
    """Round to nearest, ties away from zero."""


class RoundNearestEvenOp(UnaryOp, name="round_nearest_even", traits=[Pure]):
    """Round to nearest, ties to even."""


class RsqrtOp(UnaryOp, name="rsqrt", traits=[Pure]):
    """1 / sqrt(x)."""


class SignOp(UnaryOp, name="sign", traits=[Pure]):
    """-1, 0 or 1 by the sign of x (nan stays nan)."""


class SineOp(UnaryOp, name="sine", traits=[Pure]):
    """sin(x)."""


class SqrtOp(UnaryOp, name="sqrt", traits=[Pure]):
    """Square root."""


class TanOp(UnaryOp, name="tan", traits=[Pure]):
    """tan(x)."""


class TanhOp(UnaryOp, name="tanh", traits=[Pure]):
    """Hyperbolic tangent."""


class ReducePrecisionOp(UnaryOp, name="reduce_precision", traits=[Pure]):
    """Round to a float format with `exponent_bits` and `mantissa_bits`, keeping the type."""

    exponent_bits: Any
    mantissa_bits: Any


class AddOp(BinaryOp, name="add", traits=[Pure]):
    """`%r = "xhlo.add"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>`."""


class SubtractOp(BinaryOp, name="subtract", traits=[Pure]):
    """a - b."""


class MultiplyOp(BinaryOp, name="multiply", traits=[Pure]):
    """a * b."""


class DivideOp(BinaryOp, name="divide", traits=[Pure]):
    """a / b (integer division truncates)."""


class RemainderOp(BinaryOp, name="remainder", traits=[Pure]):
    """Remainder with the sign of the dividend."""


class MaximumOp(BinaryOp, name="maximum", traits=[Pure]):
    """max(a, b), nan-propagating."""


class MinimumOp(BinaryOp, name="minimum", traits=[Pure]):
    """min(a, b), nan-propagating."""


class PowerOp(BinaryOp, name="power", traits=[Pure]):
    """a ^ b."""


class Atan2Op(BinaryOp, name="atan2", traits=[Pure]):
    """atan(a / b) with the quadrant of (b, a)."""


class AndOp(BinaryOp, name="and", traits=[Pure]):
    """Bitwise or logical and."""


class OrOp(BinaryOp, name="or", traits=[Pure]):
    """Bitwise or logical or."""


class XorOp(BinaryOp, name="xor", traits=[Pure]):
    """Bitwise or logical xor."""


class ShiftLeftOp(BinaryOp, name="shift_left", traits=[Pure]):
    """a << b."""


class ShiftRightArithmeticOp(BinaryOp, name="shift_right_arithmetic", traits=[Pure]):
    """a >> b, sign-filling."""


class ShiftRightLogicalOp(BinaryOp, name="shift_right_logical", traits=[Pure]):
    """a >> b, zero-filling."""


class ComplexOp(BinaryOp, name="complex", traits=[Pure]):
    """complex(real, imag)."""

    def check(self):
        return same_shape_problem([self.lhs.type, self.rhs.type, self.result.type])


COMPARISON_DIRECTIONS = ("EQ", "NE", "GE", "GT", "LE", "LT")
COMPARISON_TYPES = ("FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED", "NOTYPE")


class CompareOp(ElementwiseOp, name="compare", traits=[Pure]):
    """`"xhlo.compare"(%a, %b) {comparison_direction = "LT", compare_type = "FLOAT"}` -> i1 tensor."""

    lhs: Operand[Any]
    rhs: Operand[Any]
    comparison_direction: Any
    result: Result[Any]

    def check(self):
        direction = string_value(self.comparison_direction)
        if direction not in COMPARISON_DIRECTIONS:
            return f"unknown comparison_direction '{direction}'"
        if "compare_type" in self.attributes:
            kind = string_value(self.attributes["compare_type"])
            if kind not in COMPARISON_TYPES:
                return f"unknown compare_type '{kind}'"
        if problem := same_type_problem([self.lhs.type, self.rhs.type]):
            return problem
        if not is_predicate(element_of(self.result.type)):
            return f"result must have i1 elements, got {self.result.type}"
        return same_shape_problem([self.lhs.type, self.result.type])


class SelectOp(ElementwiseOp, name="select", traits=[Pure]):
    """pred ? on_true : on_false, elementwise (a scalar pred selects whole tensors)."""

    pred: Operand[Any]
    on_true: Operand[Any]
    on_false: Operand[Any]
    result: Result[Any]

    def check(self):
        if not is_predicate(element_of(self.pred.type)):
            return f"predicate must have i1 elements, got {self.pred.type}"
        if problem := same_type_problem([self.on_true.type, self.on_false.type, self.result.type]):
            return problem
        if not is_scalar_tensor(self.pred.type):
            return same_shape_problem([self.pred.type, self.result.type])
        return None


class ClampOp(ElementwiseOp, name="clamp", traits=[Pure]):
    """min(max(operand, min), max); min and max may be scalars."""

    min: Operand[Any]
    operand: Operand[Any]
    max: Operand[Any]
    result: Result[Any]

    def check(self):
        if problem := same_type_problem([self.operand.type, self.result.type]):
            return problem
        for bound in (self.min, self.max):
            if not is_scalar_tensor(bound.type) and shape_of(bound.type) != shape_of(self.operand.type):
                return f"bound {bound.type} is neither a scalar nor shaped like {self.operand.type}"
        return None


class ConvertOp(ElementwiseOp, name="convert", traits=[Pure]):
    """Elementwise conversion to the result's element type."""

    operand: Operand[Any]
    result: Result[Any]

    def check(self):
        return same_shape_problem([self.operand.type, self.result.type])


class BitcastConvertOp(XhloOp, name="bitcast_convert", traits=[Pure]):
    """Reinterpret the bits of the operand as the result's element type. Not elementwise (StableHLO
    gives it no Elementwise trait): between element types of different widths it adds or drops
    the minor dimension (f64 -> 2 x f32)."""

    operand: Operand[Any]
    result: Result[Any]


# ---------------------------------------------------------------- shape ops


class BroadcastOp(XhloOp, name="broadcast", traits=[Pure]):
    """HLO broadcast: operand dimension i becomes result dimension `dimensions[i]`."""

    operand: Operand[Any]
    dimensions: Any
    result: Result[Any]

    def check(self):
        dims = ints(self.dimensions)
        operand_shape, result_shape = shape_of(self.operand.type), shape_of(self.result.type)
        if len(dims) != len(operand_shape):
            return f"{len(dims)} dimensions for an operand of rank {len(operand_shape)}"
        if len(set(dims)) != len(dims) or any(d < 0 or d >= len(result_shape) for d in dims):
            return f"dimensions {dims} are not distinct dimensions of the result {self.result.type}"
        for i, d in enumerate(dims):
            if operand_shape[i] not in (1, result_shape[d]):
                return f"operand dimension {i} (size {operand_shape[i]}) cannot broadcast to result dimension {d} (size {result_shape[d]})"
        if element_of(self.operand.type) != element_of(self.result.type):
            return f"element type changes from {self.operand.type} to {self.result.type}"
        return None


class ReshapeOp(XhloOp, name="reshape", traits=[Pure]):
    """Same elements, new shape (row-major order)."""

    operand: Operand[Any]
    result: Result[Any]

    def check(self):
        if _product(shape_of(self.operand.type)) != _product(shape_of(self.result.type)):
            return f"element count changes: {self.operand.type} -> {self.result.type}"
        if element_of(self.operand.type) != element_of(self.result.type):
            return f"element type changes: {self.operand.type} -> {self.result.type}"
        return None


def _product(values) -> int:
    total = 1
    for v in values:
        total *= v
    return total


class TransposeOp(XhloOp, name="transpose", traits=[Pure]):
    """result dimension i is operand dimension `permutation[i]`."""

    operand: Operand[Any]
    permutation: Any
    result: Result[Any]

    def check(self):
        perm = ints(self.permutation)
        operand_shape = shape_of(self.operand.type)
        if sorted(perm) != list(range(len(operand_shape))):
            return f"permutation {perm} is not a permutation of rank {len(operand_shape)}"
        expected = [operand_shape[p] for p in perm]
        if shape_of(self.result.type) != expected:
            return f"result shape {shape_of(self.result.type)} should be {expected}"
        return None


class SliceOp(XhloOp, name="slice", traits=[Pure]):
    """Static strided slice [start, limit) with strides."""

    operand: Operand[Any]
    start_indices: Any
    limit_indices: Any
    strides: Any
    result: Result[Any]

    def check(self):
        starts, limits, strides = ints(self.start_indices), ints(self.limit_indices), ints(self.strides)
        operand_shape = shape_of(self.operand.type)
        if not len(starts) == len(limits) == len(strides) == len(operand_shape):
            return f"slice attributes do not match rank {len(operand_shape)}"
        expected = []
        for start, limit, stride, size in zip(starts, limits, strides, operand_shape):
            if not (0 <= start <= limit <= size) or stride <= 0:
                return f"slice [{start}:{limit}:{stride}] is out of bounds for a dimension of size {size}"
            expected.append(-(-(limit - start) // stride))
        if shape_of(self.result.type) != expected:
            return f"result shape {shape_of(self.result.type)} should be {expected}"
        return None


class DynamicSliceOp(XhloOp, name="dynamic_slice", traits=[Pure]):
    """Slice of `slice_sizes` at clamped runtime start indices (one scalar per dimension).

    Ops with one variadic group are read through `self.operands`: the generated accessors
    expect an operandSegmentSizes attribute that IRDL only needs with several groups.
    """

    operand: Operand[Any]
    start_indices: Sequence[Operand[Any]]
    slice_sizes: Any
    result: Result[Any]

    def check(self):
        sizes = ints(self.slice_sizes)
        operand_shape = shape_of(self.operands[0].type)
        if len(self.operands) - 1 != len(operand_shape) or len(sizes) != len(operand_shape):
            return f"needs {len(operand_shape)} start indices and slice sizes"
        if any(s < 0 or s > d for s, d in zip(sizes, operand_shape)):
            return f"slice_sizes {sizes} exceed operand shape {operand_shape}"
        if shape_of(self.result.type) != sizes:
            return f"result shape {shape_of(self.result.type)} should be {sizes}"
        return None


class DynamicUpdateSliceOp(XhloOp, name="dynamic_update_slice", traits=[Pure]):
    """operand with `update` written at clamped runtime start indices."""

    operand: Operand[Any]
    update: Operand[Any]
    start_indices: Sequence[Operand[Any]]
    result: Result[Any]

    def check(self):
        operand_shape = shape_of(self.operands[0].type)
        if len(self.operands) - 2 != len(operand_shape):
            return f"needs {len(operand_shape)} start indices"
        if any(u > d for u, d in zip(shape_of(self.operands[1].type), operand_shape)):
            return f"update {self.operands[1].type} does not fit in {self.operands[0].type}"
        return same_type_problem([self.operands[0].type, self.result.type])


class ConcatenateOp(XhloOp, name="concatenate", traits=[Pure]):
    """Join inputs along `dimension` (inputs differ in shape: numbered slots, not a variadic)."""

    __annotations__ = slots("inputs", Operand)
    dimension: Any
    result: Result[Any]

    def check(self):
        dim = int_value(self.dimension)
        shapes = [shape_of(v.type) for v in self.operands]
        if not shapes:
            return "needs at least one input"
        rank = len(shapes[0])
        if not 0 <= dim < rank:
            return f"dimension {dim} is out of range for rank {rank}"
        expected = list(shapes[0])
        expected[dim] = sum(s[dim] for s in shapes)
        for s in shapes:
            if len(s) != rank or any(a != b for i, (a, b) in enumerate(zip(s, shapes[0])) if i != dim):
                return f"input shapes {shapes} differ outside dimension {dim}"
        if shape_of(self.result.type) != expected:
            return f"result shape {shape_of(self.result.type)} should be {expected}"
        return None


class PadOp(XhloOp, name="pad", traits=[Pure]):
    """Edge (possibly negative) and interior padding with a scalar padding value."""

    operand: Operand[Any]
    padding_value: Operand[Any]
    edge_padding_low: Any
    edge_padding_high: Any
    interior_padding: Any
    result: Result[Any]

    def check(self):
        low, high, interior = ints(self.edge_padding_low), ints(self.edge_padding_high), ints(self.interior_padding)
        operand_shape = shape_of(self.operand.type)
        if not len(low) == len(high) == len(interior) == len(operand_shape):
            return f"padding attributes do not match rank {len(operand_shape)}"
        if any(i < 0 for i in interior):
            return f"interior padding {interior} is negative"
        expected = [lo + hi + d + max(d - 1, 0) * i for lo, hi, d, i in zip(low, high, operand_shape, interior)]
        if shape_of(self.result.type) != expected:
            return f"result shape {shape_of(self.result.type)} should be {expected}"
        if not is_scalar_tensor(self.padding_value.type):
            return f"padding value must be a scalar tensor, got {self.padding_value.type}"
        return None


class ReverseOp(XhloOp, name="reverse", traits=[Pure]):
    """Reverse the order of elements along `dimensions`."""

    operand: Operand[Any]
    dimensions: Any
    result: Result[Any]

    def check(self):
        rank = tensor(self.operand.type).rank
        if any(not 0 <= d < rank for d in ints(self.dimensions)):
            return f"dimensions {ints(self.dimensions)} out of range for rank {rank}"
        return same_type_problem([self.operand.type, self.result.type])


class IotaOp(XhloOp, name="iota", traits=[Pure]):
    """0, 1, 2, ... along `iota_dimension`."""

    iota_dimension: Any
    result: Result[Any]

    def check(self):
        rank = tensor(self.result.type).rank
        if not 0 <= int_value(self.iota_dimension) < rank:
            return f"iota_dimension {int_value(self.iota_dimension)} out of range for rank {rank}"
        return None


class ConstantOp(XhloOp, name="constant", traits=[Pure]):
    """`%c = "xhlo.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>`."""

    value: Any
    result: Result[Any]

    def check(self):
        if not isinstance(self.value, ir.DenseElementsAttr):
            return f"value must be a dense elements attribute, got {self.value}"
        value_type = ir.DenseElementsAttr(self.value).type
        if value_type != self.result.type:
            return f"value type {value_type} differs from result type {self.result.type}"
        return None


# ---------------------------------------------------------------- computations in regions


class ReturnOp(XhloOp, name="return", traits=[ir.IsTerminatorTrait]):
    """Terminator of a region computation (HLO's ROOT)."""

    __annotations__ = slots("values", Operand)

    def check(self):
        parent = self.operation.parent
        if parent is None or not parent.name.startswith("xhlo."):
            return f"terminates a region of {parent.name if parent else 'nothing'}; only xhlo region computations end in xhlo.return"
        return None


def region_signature_problem(region: ir.Region, arguments: list[ir.Type], results: list[ir.Type], what: str) -> str | None:
    """The region's entry block takes `arguments` and returns `results`."""
    if len(region.blocks) != 1:
        return f"{what} must have exactly one block"
    block = region.blocks[0]
    got_args = [a.type for a in block.arguments]
    if not same_types(got_args, arguments):
        return f"{what} takes ({type_list(got_args)}), expected ({type_list(arguments)})"
    terminator = block.operations[len(block.operations) - 1]
    got_results = [v.type for v in terminator.operands]
    if not same_types(got_results, results):
        return f"{what} returns ({type_list(got_results)}), expected ({type_list(results)})"
    return None


def same_types(got: list[ir.Type], expected: list[ir.Type]) -> bool:
    """Whether the types print the same; equal (uniqued) types do, without printing each."""
    return got == list(expected) or [str(t) for t in got] == [str(t) for t in expected]


def halves(values) -> tuple[list[ir.Value], list[ir.Value]]:
    """Split a reduce's operands into its inputs and its init values."""
    values = list(values)
    return values[: len(values) // 2], values[len(values) // 2 :]


def scalar_of(t: ir.Type) -> ir.Type:
    return ir.RankedTensorType.get([], element_of(t))


def reducer_problem(region: ir.Region, inputs, init_values, what: str) -> str | None:
    """A reducer takes (accumulators..., elements...) as scalars and returns the accumulators."""
    if len(inputs) != len(init_values):
        return f"{len(inputs)} inputs but {len(init_values)} init values"
    accumulators = [scalar_of(v.type) for v in init_values]
    for init in init_values:
        if not is_scalar_tensor(init.type):
            return f"init value {init.type} is not a scalar tensor"
    return region_signature_problem(region, accumulators + accumulators, accumulators, what)


class ReduceOp(XhloOp, name="reduce", traits=[ISOLATED]):
    """Variadic reduction of `inputs` over `dimensions` with the `body` reducer."""

    __annotations__ = {**slots("inputs", Operand, NARROW), **slots("init_values", Operand, NARROW)}
    dimensions: Any
    __annotations__.update(slots("results", Result, NARROW))
    body: Region

    def check(self):
        inputs, init_values = halves(self.operands)
        if problem := reducer_problem(self.body, inputs, init_values, "reducer"):
            return problem
        dims = ints(self.dimensions)
        for value, result in zip(inputs, self.results):
            operand_shape = shape_of(value.type)
            if any(not 0 <= d < len(operand_shape) for d in dims) or len(set(dims)) != len(dims):
                return f"dimensions {dims} are not distinct dimensions of {value.type}"
            expected = [s for i, s in enumerate(operand_shape) if i not in dims]
            if shape_of(result.type) != expected:
                return f"result shape {shape_of(result.type)} should be {expected}"
        return None


class ReduceWindowOp(XhloOp, name="reduce_window", traits=[ISOLATED]):
    """Reduction over sliding windows (`window_dimensions`, optional strides, dilations, padding)."""

    __annotations__ = {**slots("inputs", Operand, NARROW), **slots("init_values", Operand, NARROW)}
    window_dimensions: Any
    __annotations__.update(slots("results", Result, NARROW))
    body: Region

    def check(self):
        inputs, init_values = halves(self.operands)
        if problem := reducer_problem(self.body, inputs, init_values, "reducer"):
            return problem
        rank = tensor(inputs[0].type).rank
        if len(ints(self.window_dimensions)) != rank:
            return f"window_dimensions has {len(ints(self.window_dimensions))} entries for rank {rank}"
        return None


class SelectAndScatterOp(XhloOp, name="select_and_scatter", traits=[ISOLATED]):
    """Scatter `source` into windows of `operand` at the positions `select` picks."""

    operand: Operand[Any]
    source: Operand[Any]
    init_value: Operand[Any]
    result: Result[Any]
    select: Region
    scatter: Region

    def check(self):
        scalar = scalar_of(self.operand.type)
        predicate = ir.RankedTensorType.get([], ir.IntegerType.get_signless(1))
        return region_signature_problem(self.select, [scalar, scalar], [predicate], "select") or region_signature_problem(
            self.scatter, [scalar, scalar], [scalar], "scatter"
        )


class DotOp(XhloOp, name="dot", traits=[Pure]):
    """HLO dot with general dimension numbers (`dot_dimension_numbers` dictionary)."""

    lhs: Operand[Any]
    rhs: Operand[Any]
    dot_dimension_numbers: Any
    result: Result[Any]

    def check(self):
        numbers = ir.DictAttr(self.dot_dimension_numbers)
        get = lambda key: ints(numbers[key]) if key in numbers else []
        lhs_batch, rhs_batch = get("lhs_batching_dimensions"), get("rhs_batching_dimensions")
        lhs_contract, rhs_contract = get("lhs_contracting_dimensions"), get("rhs_contracting_dimensions")
        lhs, rhs = shape_of(self.lhs.type), shape_of(self.rhs.type)
        if len(lhs_batch) != len(rhs_batch) or len(lhs_contract) != len(rhs_contract):
            return "lhs and rhs batching/contracting dimension counts differ"
        for a, b in zip(lhs_batch + lhs_contract, rhs_batch + rhs_contract):
            if not (0 <= a < len(lhs) and 0 <= b < len(rhs)):
                return f"dimension pair ({a}, {b}) out of range for {self.lhs.type} x {self.rhs.type}"
            if lhs[a] != rhs[b]:
                return f"lhs dimension {a} (size {lhs[a]}) does not match rhs dimension {b} (size {rhs[b]})"
        free_lhs = [s for i, s in enumerate(lhs) if i not in lhs_batch + lhs_contract]
        free_rhs = [s for i, s in enumerate(rhs) if i not in rhs_batch + rhs_contract]
        expected = [lhs[i] for i in lhs_batch] + free_lhs + free_rhs
        if shape_of(self.result.type) != expected:
            return f"result shape {shape_of(self.result.type)} should be {expected}"
        return None


class ConvolutionOp(XhloOp, name="convolution", traits=[Pure]):
    """HLO convolution; `dimension_numbers` names the batch/feature/spatial dimensions."""

    lhs: Operand[Any]
    rhs: Operand[Any]
    dimension_numbers: Any
    feature_group_count: Any
    batch_group_count: Any
    result: Result[Any]

    def check(self):
        numbers = ir.DictAttr(self.dimension_numbers)
        spatial = ints(numbers["input_spatial_dimensions"])
        rank = tensor(self.lhs.type).rank
        if len(spatial) + 2 != rank:
            return f"{len(spatial)} spatial dimensions for an input of rank {rank}"
        lhs, rhs = shape_of(self.lhs.type), shape_of(self.rhs.type)
        features = lhs[int_value(numbers["input_feature_dimension"])]
        kernel_in = rhs[int_value(numbers["kernel_input_feature_dimension"])]
        groups = int_value(self.feature_group_count)
        if groups < 1 or features != kernel_in * groups:
            return f"input features {features} != kernel input features {kernel_in} x feature_group_count {groups}"
        return None


class GatherOp(XhloOp, name="gather", traits=[Pure]):
    """HLO gather (`dimension_numbers` dictionary, `slice_sizes`)."""

    operand: Operand[Any]
    start_indices: Operand[Any]
    dimension_numbers: Any
    slice_sizes: Any
    result: Result[Any]

    def check(self):
        sizes = ints(self.slice_sizes)
        operand_shape = shape_of(self.operand.type)
        if len(sizes) != len(operand_shape) or any(s > d for s, d in zip(sizes, operand_shape)):
            return f"slice_sizes {sizes} do not fit operand shape {operand_shape}"
        return None


class ScatterOp(XhloOp, name="scatter", traits=[ISOLATED]):
    """HLO scatter: combine `updates` into `inputs` at `scatter_indices` with the `body` combiner."""

    __annotations__ = {**slots("inputs", Operand, NARROW), "scatter_indices": Operand[Any], **slots("updates", Operand, NARROW)}
    dimension_numbers: Any
    __annotations__.update(slots("results", Result, NARROW))
    body: Region

    def check(self):
        count = (len(self.operands) - 1) // 2
        inputs = list(self.operands)[:count]
        if len(self.operands) != 2 * count + 1 or count != len(self.results):
            return "inputs, updates and results must be equally many"
        scalars = [scalar_of(v.type) for v in inputs]
        return region_signature_problem(self.body, scalars + scalars, scalars, "combiner")


class SortOp(XhloOp, name="sort", traits=[ISOLATED]):
    """Sort `inputs` together along `dimension` by the `comparator` (a strict less-than)."""

    __annotations__ = slots("inputs", Operand, NARROW)
    dimension: Any
    is_stable: Any
    __annotations__.update(slots("results", Result, NARROW))
    comparator: Region

    def check(self):
        shapes = {tuple(shape_of(v.type)) for v in self.operands}
        if len(shapes) != 1:
            return f"inputs differ in shape: {type_list([v.type for v in self.operands])}"
        rank = len(next(iter(shapes)))
        dim = int_value(self.dimension)
        if not -rank <= dim < rank:
            return f"dimension {dim} out of range for rank {rank}"
        arguments = [scalar_of(v.type) for v in self.operands for _ in range(2)]
        predicate = ir.RankedTensorType.get([], ir.IntegerType.get_signless(1))
        return region_signature_problem(self.comparator, arguments, [predicate], "comparator")


class WhileOp(XhloOp, name="while"):
    """Loop over carried values: `cond` returns a scalar i1, `body` returns the next values."""

    __annotations__ = {**slots("operands", Operand), **slots("results", Result)}
    cond: Region
    body: Region

    def check(self):
        carried = [v.type for v in self.operands]
        if [str(t) for t in carried] != [str(r.type) for r in self.results]:
            return f"carried types ({type_list(carried)}) differ from result types"
        predicate = ir.RankedTensorType.get([], ir.IntegerType.get_signless(1))
        return region_signature_problem(self.cond, carried, [predicate], "cond") or region_signature_problem(
            self.body, carried, carried, "body"
        )


class ConditionalOp(XhloOp, name="conditional"):
    """HLO conditional: `branch_computations` are functions; branch i gets its slice of `branch_operands`.

    The selector is an i32 index (out-of-range picks the last branch) or an i1 predicate
    (true picks branch 0, false branch 1). `branch_operand_counts` splits `branch_operands`.
    """

    index: Operand[Any]
    __annotations__.update(slots("branch_operands", Operand))
    branch_computations: Any
    branch_operand_counts: Any
    __annotations__.update(slots("results", Result))

    def check(self):
        branches = ir.ArrayAttr(self.branch_computations)
        counts = ints(self.branch_operand_counts)
        if len(branches) != len(counts) or sum(counts) != len(self.operands) - 1:
            return f"{len(branches)} branches but branch_operand_counts {counts} for {len(self.operands) - 1} operands"
        selector = element_of(self.index.type)
        if not is_scalar_tensor(self.index.type):
            return f"selector must be a scalar tensor, got {self.index.type}"
        if is_predicate(selector) and len(branches) != 2:
            return f"a predicate selects between exactly 2 branches, got {len(branches)}"
        return None


class CallOp(XhloOp, name="call"):
    """Call of the computation `callee` (a function symbol)."""

    __annotations__ = slots("operands", Operand)
    callee: Any
    __annotations__.update(slots("results", Result))


class TupleOp(XhloOp, name="tuple", traits=[Pure]):
    """Build a tuple value."""

    __annotations__ = slots("operands", Operand)
    result: Result[Any]


class GetTupleElementOp(XhloOp, name="get_tuple_element", traits=[Pure]):
    """Element `index` of a tuple."""

    operand: Operand[Any]
    index: Any
    result: Result[Any]

    def check(self):
        if not isinstance(self.operand.type, ir.TupleType):
            return f"operand is not a tuple: {self.operand.type}"
        elements = ir.TupleType(self.operand.type)
        i = int_value(self.index)
        if not 0 <= i < elements.num_types:
            return f"index {i} out of range for {self.operand.type}"
        if elements.get_type(i) != self.result.type:
            return f"result type {self.result.type} should be {elements.get_type(i)}"
        return None


class CustomCallOp(XhloOp, name="custom_call"):
    """Call of a backend target by name (`call_target_name`)."""

    __annotations__ = slots("operands", Operand)
    call_target_name: Any
    __annotations__.update(slots("results", Result))


class RngBitGeneratorOp(XhloOp, name="rng_bit_generator"):
    """Random bits from `initial_state` with `rng_algorithm` (DEFAULT, THREE_FRY, PHILOX)."""

    initial_state: Operand[Any]
    rng_algorithm: Any
    output_state: Result[Any]
    output: Result[Any]

    def check(self):
        if self.initial_state.type != self.output_state.type:
            return f"output state {self.output_state.type} differs from initial state {self.initial_state.type}"
        return None


class RngOp(XhloOp, name="rng"):
    """Random numbers with `rng_distribution` (UNIFORM in [a, b), NORMAL(a, b))."""

    a: Operand[Any]
    b: Operand[Any]
    shape: Operand[Any]
    rng_distribution: Any
    result: Result[Any]


class FftOp(XhloOp, name="fft", traits=[Pure]):
    """FFT of `fft_type` (FFT, IFFT, RFFT, IRFFT) over the trailing `fft_length` dimensions."""

    operand: Operand[Any]
    fft_type: Any
    fft_length: Any
    result: Result[Any]

    def check(self):
        kind = string_value(self.fft_type)
        if kind not in ("FFT", "IFFT", "RFFT", "IRFFT"):
            return f"unknown fft_type '{kind}'"
        return None


class TriangularSolveOp(XhloOp, name="triangular_solve", traits=[Pure]):
    """Solve op(a) x = b (left_side) or x op(a) = b with triangular `a`."""

    a: Operand[Any]
    b: Operand[Any]
    left_side: Any
    lower: Any
    unit_diagonal: Any
    transpose_a: Any
    result: Result[Any]

    def check(self):
        a = shape_of(self.a.type)
        if len(a) < 2 or a[-1] != a[-2]:
            return f"a must be a batch of square matrices, got {self.a.type}"
        return same_type_problem([self.b.type, self.result.type])


class CholeskyOp(XhloOp, name="cholesky", traits=[Pure]):
    """Cholesky factor of a batch of symmetric positive definite matrices."""

    a: Operand[Any]
    lower: Any
    result: Result[Any]

    def check(self):
        return same_type_problem([self.a.type, self.result.type])


# ---------------------------------------------------------------- collectives


def replica_groups_problem(attr: ir.Attribute) -> str | None:
    if not isinstance(attr, ir.DenseIntElementsAttr):
        return f"replica_groups must be a 2-d integer dense attribute, got {attr}"
    groups_type = ir.ShapedType(ir.DenseIntElementsAttr(attr).type)
    if groups_type.rank != 2:
        return f"replica_groups must be 2-d, got {groups_type}"
    members = [v for v in ints(attr) if v != -1]
    if len(set(members)) != len(members):
        return f"a device appears twice in replica_groups {members}"
    return None


class CollectiveOp(XhloOp):
    """Base of collectives over `replica_groups`; the module verifier checks them against the config."""

    def check(self):
        if "replica_groups" in self.attributes:
            return replica_groups_problem(self.attributes["replica_groups"])
        return None


class AllReduceOp(CollectiveOp, name="all_reduce", traits=[ISOLATED]):
    """Reduce each operand across the devices of its group with the `computation` reducer."""

    __annotations__ = slots("operands", Operand)
    replica_groups: Any
    __annotations__.update(slots("results", Result))
    computation: Region


class AllGatherOp(CollectiveOp, name="all_gather"):
    """Concatenate each operand across its group along `all_gather_dim`."""

    __annotations__ = slots("operands", Operand)
    all_gather_dim: Any
    replica_groups: Any
    __annotations__.update(slots("results", Result))


class ReduceScatterOp(CollectiveOp, name="reduce_scatter", traits=[ISOLATED]):
    """Reduce across the group, then scatter blocks along `scatter_dimension`."""

    operand: Operand[Any]
    scatter_dimension: Any
    replica_groups: Any
    result: Result[Any]
    computation: Region


class AllToAllOp(CollectiveOp, name="all_to_all"):
    """Split along `split_dimension`, exchange, concatenate along `concat_dimension`."""

    __annotations__ = slots("operands", Operand, NARROW)
    split_dimension: Any
    concat_dimension: Any
    split_count: Any
    replica_groups: Any
    __annotations__.update(slots("results", Result, NARROW))


class CollectivePermuteOp(XhloOp, name="collective_permute"):
    """Send the operand along `source_target_pairs`; devices that receive nothing get zeros."""

    operand: Operand[Any]
    source_target_pairs: Any
    result: Result[Any]


class CollectiveBroadcastOp(CollectiveOp, name="collective_broadcast"):
    """Broadcast each operand of the group's first device to the group; with
    `has_dynamic_root`, the last operand says, per operand, which member's to take."""

    __annotations__ = slots("operands", Operand, NARROW)
    replica_groups: Any
    __annotations__.update(slots("results", Result, NARROW))

    def check(self):
        data = list(self.operands)[:-1] if "has_dynamic_root" in self.attributes else list(self.operands)
        if [str(v.type) for v in data] != [str(r.type) for r in self.results]:
            return f"results {type_list([r.type for r in self.results])} must have the types of the broadcast operands {type_list([v.type for v in data])}"
        return super().check()


class CollectiveReduceOp(CollectiveOp, name="collective_reduce", traits=[ISOLATED]):
    """Reduce each operand across its group onto the group's first device; the others get zeros."""

    __annotations__ = slots("operands", Operand, NARROW)
    replica_groups: Any
    __annotations__.update(slots("results", Result, NARROW))
    computation: Region


class PartitionIdOp(XhloOp, name="partition_id"):
    """This device's partition id as a ui32 scalar."""

    result: Result[Any]


class ReplicaIdOp(XhloOp, name="replica_id"):
    """This device's replica id as a ui32 scalar."""

    result: Result[Any]


class InfeedOp(XhloOp, name="infeed"):
    """Read the next values of this device's infeed; the last result is a token."""

    token: Operand[Any]
    __annotations__.update(slots("results", Result, NARROW))


class OutfeedOp(XhloOp, name="outfeed"):
    """Append the operands to this device's outfeed; the last operand is a token."""

    __annotations__ = slots("operands", Operand, NARROW)
    result: Result[Any]


class SendOp(XhloOp, name="send"):
    """Send the operands on channel `channel_handle` (to the host, or along
    `source_target_pairs`); the last operand is a token."""

    __annotations__ = slots("operands", Operand, NARROW)
    channel_handle: Any
    result: Result[Any]


class RecvOp(XhloOp, name="recv"):
    """Receive the values sent on channel `channel_handle`, in the order they were sent; the
    last result is a token."""

    token: Operand[Any]
    channel_handle: Any
    __annotations__.update(slots("results", Result, NARROW))


class OptimizationBarrierOp(XhloOp, name="optimization_barrier"):
    """Identity that no optimization may move operations across."""

    __annotations__ = {**slots("operands", Operand), **slots("results", Result)}

    def check(self):
        if [str(v.type) for v in self.operands] != [str(r.type) for r in self.results]:
            return "results must have the operand types"
        return None


class AfterAllOp(XhloOp, name="after_all", traits=[Pure]):
    """A token that orders after all operand tokens."""

    tokens: Sequence[Operand[Any]]
    result: Result[Any]


class MapOp(XhloOp, name="map", traits=[ISOLATED]):
    """Apply the scalar `computation` elementwise over the inputs."""

    __annotations__ = slots("inputs", Operand, NARROW)
    dimensions: Any
    result: Result[Any]
    computation: Region


# ---------------------------------------------------------------- HLO-only ops

FUSION_KINDS = ("loop", "input", "output", "custom")


class FusionOp(XhloOp, name="fusion", traits=[ISOLATED]):
    """A fused computation: the region takes the operands and returns the results; `kind` is loop/input/output/custom."""

    __annotations__ = slots("operands", Operand, FUSION_SLOTS)
    kind: Any
    __annotations__.update(slots("results", Result, FUSION_SLOTS))
    fused_computation: Region

    def check(self):
        kind = string_value(self.kind)
        if kind not in FUSION_KINDS:
            return f"unknown fusion kind '{kind}' (expected one of {', '.join(FUSION_KINDS)})"
        return region_signature_problem(
            self.fused_computation,
            [v.type for v in self.operands],
            [r.type for r in self.results],
            "fused computation",
        )


class CopyOp(XhloOp, name="copy", traits=[Pure]):
    """A copy to a new buffer (possibly with another layout)."""

    operand: Operand[Any]
    result: Result[Any]

    def check(self):
        return same_type_problem([self.operand.type, self.result.type])


class BitcastOp(XhloOp, name="bitcast", traits=[Pure]):
    """Reinterpret a buffer with another shape of the same byte size (no data movement)."""

    operand: Operand[Any]
    result: Result[Any]

    def check(self):
        size = lambda t: _product(shape_of(t)) * bit_width(element_of(t))
        if size(self.operand.type) != size(self.result.type):
            return f"sizes differ: {self.operand.type} -> {self.result.type}"
        return None


# the ElementwiseOp classes by op name (`xhlo.add`), which is how the passes meet them
ELEMENTWISE_OPS = frozenset(op_class.OPERATION_NAME for op_class in Xhlo.operations if issubclass(op_class, ElementwiseOp))
