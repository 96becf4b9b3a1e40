"""Rewrites of elementwise ops: identities, involutions, compare and select, and XLA's
division by a constant (a float's reciprocal; an integer power of two's shifts, and the mask
of an unsigned remainder).

Each one but `divide_by_constant_as_multiply` is exact for the element types it accepts.
Floats are the usual trap: x + 0.0 is not x when x is -0.0 (-0.0 + 0.0 = +0.0), but
x + (-0.0) is x for every x; x * 0 is not 0 when x is NaN, an infinity or negative; x == x
is false for NaN.
"""

import ml_dtypes
import numpy as np

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.dialects.xhlo.types import element_of
from mlirxla.mlir import ir

from .common import (
    NO_MATCH,
    bool_constant,
    broadcast,
    int_width,
    is_float,
    is_integer,
    is_unsigned,
    is_negative_zero,
    is_positive_zero,
    produced_by,
    splat_attribute,
    splat_constant,
    splat_number,
)

# the float types whose reciprocal XLA computes in the type itself (bf16 and f16 through f32, as
# Eigen's half types divide)
RECIPROCAL_TYPES = {"f64": np.float64, "f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}


def _is_additive_identity(value: ir.Value, options) -> bool:
    """0 for integers; -0.0 for floats (+0.0 too under ignore_signed_zeros)."""
    number = splat_number(value)
    if number is None or number != 0:
        return False
    if is_integer(element_of(value.type)):
        return True
    return is_negative_zero(number) or options.ignore_signed_zeros


def _is_subtractive_identity(value: ir.Value, options) -> bool:
    """0 for integers; +0.0 for floats (x - (+0.0) = x + (-0.0)); -0.0 too under ignore_signed_zeros."""
    number = splat_number(value)
    if number is None or number != 0:
        return False
    if is_integer(element_of(value.type)):
        return True
    return is_positive_zero(number) or options.ignore_signed_zeros


def _is_one(value: ir.Value) -> bool:
    element = element_of(value.type)
    return (is_integer(element) or is_float(element)) and splat_number(value) == 1


def fold_add_zero(op: ir.Operation, options):
    """x + 0 -> x, 0 + x -> x for integers; x + (-0.0) -> x, (-0.0) + x -> x for floats."""
    lhs, rhs = op.operands
    if _is_additive_identity(rhs, options):
        return lhs
    if _is_additive_identity(lhs, options):
        return rhs
    return NO_MATCH


def fold_subtract_zero(op: ir.Operation, options):
    """x - 0 -> x for integers; x - (+0.0) -> x for floats."""
    lhs, rhs = op.operands
    if not _is_subtractive_identity(rhs, options):
        return NO_MATCH
    return lhs


def fold_multiply_one(op: ir.Operation, options):
    """x * 1 -> x, 1 * x -> x for integers and floats."""
    lhs, rhs = op.operands
    if _is_one(rhs):
        return lhs
    if _is_one(lhs):
        return rhs
    return NO_MATCH


def fold_multiply_zero(op: ir.Operation, options):
    """x * 0 -> 0, 0 * x -> 0 for integers only (NaN * 0 is NaN, -1.0 * 0 is -0.0)."""
    lhs, rhs = op.operands
    if not is_integer(element_of(op.result.type)):
        return NO_MATCH
    if splat_number(rhs) == 0:
        return rhs
    if splat_number(lhs) == 0:
        return lhs
    return NO_MATCH


def fold_divide_one(op: ir.Operation, options):
    """x / 1 -> x for integers and floats."""
    lhs, rhs = op.operands
    if not _is_one(rhs):
        return NO_MATCH
    return lhs


def is_non_negative(value: ir.Value) -> bool:
    """Whether every element of a float `value` is +0, positive or NaN by how it is made: an
    abs, an exp, a square x * x (not a sqrt: sqrt(-0) is -0)."""
    for name in ("abs", "exponential"):
        if produced_by(value, name) is not None:
            return True
    square = produced_by(value, "multiply")
    return square is not None and square.operands[0] == square.operands[1]


def power_of_half_as_sqrt(op: ir.Operation, options):
    """pow(x, 0.5) -> sqrt(x) for a float x that is never negative nor -0 (XLA's rewrite):
    they differ only at -0 (sqrt keeps the sign) and -inf. jax's `x ** 0.5` is a pow."""
    base, exponent = op.operands
    if not is_float(element_of(base.type)) or splat_number(exponent) != 0.5 or not is_non_negative(base):
        return NO_MATCH
    return create_op("xhlo.sqrt", [base], [op.result.type], {}, op.location).results[0]


def divide_by_constant_as_multiply(op: ir.Operation, options):
    """x / c -> x * (1 / c) for a float splat constant c (through a broadcast too) and x not a
    constant: XLA's rewrite (AlgebraicSimplifier::HandleDivide), inexact by up to an ulp, which
    is what XLA:CPU computes (JAX's cpu results are x * (1 / c)) and a multiply where a
    division would bound a kernel's throughput. The reciprocal is rounded to the element type
    as XLA rounds it."""
    lhs, rhs = op.operands
    element = element_of(op.result.type)
    if not options.divide_by_constant_as_multiply or str(element) not in RECIPROCAL_TYPES or splat_attribute(lhs) is not None:
        return NO_MATCH
    divisor = splat_number(rhs)
    if divisor is None:
        return NO_MATCH
    scalar_type = RECIPROCAL_TYPES[str(element)]
    computed_in = np.float64 if scalar_type is np.float64 else np.float32
    with np.errstate(divide="ignore", over="ignore"):
        reciprocal = float(scalar_type(computed_in(1.0) / computed_in(divisor)))
    scalar = splat_constant(ir.FloatAttr.get(element, reciprocal), ir.RankedTensorType.get([], element), op.location)
    multiplier = broadcast(scalar, [], op.result.type, op.location)  # a splat of the whole shape would be a buffer
    return create_op("xhlo.multiply", [lhs, multiplier], [op.result.type], {}, op.location).results[0]


def power_of_two_exponent(value: ir.Value, signed: bool, width: int) -> int | None:
    """k where `value` is a splat of 2^k, k >= 1 (below the sign bit for a signed type)."""
    number = splat_number(value)
    if not isinstance(number, int) or number < 2 or number & (number - 1):
        return None
    exponent = number.bit_length() - 1
    return exponent if exponent < width - (1 if signed else 0) else None


def shift_amount(amount: int, like: ir.Value, location) -> ir.Value:
    """A splat of `amount` shaped like `like`, through a broadcast of a scalar."""
    element = element_of(like.type)
    scalar = splat_constant(ir.IntegerAttr.get(element, amount), ir.RankedTensorType.get([], element), location)
    return broadcast(scalar, [], like.type, location)


def integer_op(name: str, lhs: ir.Value, rhs: ir.Value, location) -> ir.Value:
    return create_op(f"xhlo.{name}", [lhs, rhs], [lhs.type], {}, location).results[0]


def divide_by_power_of_two_as_shift(op: ir.Operation, options):
    """x / 2^k -> shifts for integers (XLA's HandleDivide): x >> k (logical) unsigned; signed,
    (x + ((x >> (w - 1)) >>> (w - k))) >> k (arithmetic), which adds 2^k - 1 to a negative x
    so that the shift rounds toward zero as division does. Exact. A shift is cheap where a
    division is not: fusion duplicates it into every consumer (jax's binary searches halve an
    unsigned interval each step)."""
    lhs, rhs = op.operands
    element = element_of(op.result.type)
    if not is_integer(element) or int_width(element) == 1:
        return NO_MATCH
    signed, width = not is_unsigned(element), int_width(element)
    exponent = power_of_two_exponent(rhs, signed, width)
    if exponent is None:
        return NO_MATCH
    location = op.location
    if not signed:
        return integer_op("shift_right_logical", lhs, shift_amount(exponent, lhs, location), location)
    sign = integer_op("shift_right_arithmetic", lhs, shift_amount(width - 1, lhs, location), location)
    bias = integer_op("shift_right_logical", sign, shift_amount(width - exponent, lhs, location), location)
    return integer_op("shift_right_arithmetic", integer_op("add", lhs, bias, location), shift_amount(exponent, lhs, location), location)


def remainder_by_power_of_two_as_mask(op: ir.Operation, options):
    """x % 2^k -> x & (2^k - 1) for unsigned integers (XLA's HandleRemainder). Exact."""
    lhs, rhs = op.operands
    element = element_of(op.result.type)
    if not is_unsigned(element):
        return NO_MATCH
    exponent = power_of_two_exponent(rhs, False, int_width(element))
    if exponent is None:
        return NO_MATCH
    return integer_op("and", lhs, shift_amount((1 << exponent) - 1, lhs, op.location), op.location)


def fold_double_negate(op: ir.Operation, options):
    """-(-x) -> x (integers wrap both ways, floats flip the sign bit twice)."""
    inner = produced_by(op.operands[0], "negate")
    if inner is None:
        return NO_MATCH
    return inner.operands[0]


def fold_double_not(op: ir.Operation, options):
    """not(not(x)) -> x (bitwise, so for i1 and every integer type)."""
    inner = produced_by(op.operands[0], "not")
    if inner is None:
        return NO_MATCH
    return inner.operands[0]


# x ? y comparisons of a value with itself, for integers (a float x may be NaN)
SELF_COMPARISON = {"EQ": True, "LE": True, "GE": True, "NE": False, "LT": False, "GT": False}


def fold_compare_same_operand(op: ir.Operation, options):
    """For integers: x == x, x <= x, x >= x -> true; x != x, x < x, x > x -> false."""
    lhs, rhs = op.operands
    if lhs != rhs or not is_integer(element_of(lhs.type)):
        return NO_MATCH
    direction = ir.StringAttr(op.attributes["comparison_direction"]).value
    if direction not in SELF_COMPARISON:
        return NO_MATCH
    return bool_constant(SELF_COMPARISON[direction], op.result.type, op.location)


def fold_select_constant_predicate(op: ir.Operation, options):
    """select(true, x, y) -> x; select(false, x, y) -> y (a splat predicate, scalar or not)."""
    pred, on_true, on_false = op.operands
    attr = splat_attribute(pred)
    if attr is None:
        return NO_MATCH
    return on_true if ir.BoolAttr(attr).value else on_false


def fold_select_same_operands(op: ir.Operation, options):
    """select(p, x, x) -> x."""
    _, on_true, on_false = op.operands
    if on_true != on_false:
        return NO_MATCH
    return on_true
