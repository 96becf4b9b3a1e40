"""The chlo compositions, one rule per chlo op, each written as the math it implements.

Every rule builds its op from xhlo elementwise ops. The special functions follow the
classical approximations XLA uses (Cephes rational approximations for erf/erfc, Giles'
polynomials for erf_inv, the Lanczos approximation (g = 7, n = 9) for lgamma/digamma,
Cephes' Chebyshev series for i1e, Euler-Maclaurin summation for zeta) and, on complex
operands, StableHLO's own decompositions (Hull et al.'s algorithm for asin, acos, asinh and
acosh; a log1p form for atanh and atan), so that our results agree with jaxlib's own chlo
legalization to a few ulps. f16 and bf16 are computed in f32 and converted back, as XLA does,
for the functions where accuracy needs it.

`CHLO_RULES` maps each `chlo.<name>` to its rule; `@chlo_rule(name)` registers one.
"""

import math
from collections.abc import Callable

import numpy as np

from mlirxla.dialects.xhlo.builder import XhloBuilder, dense_splat, i1_like
from mlirxla.mlir import ir

ChloRule = Callable[[XhloBuilder, ir.Operation], list[ir.Value]]
CHLO_RULES: dict[str, ChloRule] = {}


def chlo_rule(name: str):
    """Register the composition of `chlo.<name>`."""

    def register(rule: ChloRule) -> ChloRule:
        CHLO_RULES[f"chlo.{name}"] = rule
        return rule

    return register

# ---------------------------------------------------------------- helpers


def element(value: ir.Value) -> ir.Type:
    return ir.RankedTensorType(value.type).element_type


def shape(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def is_f64(t: ir.Type) -> bool:
    return isinstance(t, ir.F64Type)


def is_narrow_float(t: ir.Type) -> bool:
    return isinstance(t, (ir.F16Type, ir.BF16Type))


def float_bits(t: ir.Type) -> int:
    if isinstance(t, ir.F64Type):
        return 64
    if isinstance(t, ir.F32Type):
        return 32
    return 16


def float_max(t: ir.Type) -> float:
    if isinstance(t, ir.F64Type):
        return float(np.finfo(np.float64).max)
    if isinstance(t, ir.F32Type):
        return float(np.finfo(np.float32).max)
    if isinstance(t, ir.F16Type):
        return float(np.finfo(np.float16).max)
    return 3.3895313892515355e38  # bf16


def in_f32(b, fn, *values):
    """fn(b, *values) computed in f32 when the values are f16/bf16, converted back after."""
    original = element(values[0])
    if not is_narrow_float(original):
        return fn(b, *values)
    f32 = ir.F32Type.get()
    result = fn(b, *[b.convert(v, f32) for v in values])
    return b.convert(result, original)


def is_complex(t: ir.Type) -> bool:
    return isinstance(t, ir.ComplexType)


def part_type(z: ir.Value) -> ir.Type:
    """The tensor type of the real (and imaginary) part of complex `z`."""
    return ir.RankedTensorType.get(shape(z), ir.ComplexType(element(z)).element_type)


def parts(b, z):
    """The real and imaginary parts of complex `z`."""
    return b.op("real", [z], part_type(z)), b.op("imag", [z], part_type(z))


def compose(b, real, imag, like):
    """complex(real, imag), of the type of `like`."""
    return b.op("complex", [real, imag], like.type)


def const(b, value, like):
    """A splat of real `value` shaped like `like`; value + 0i for a complex `like`."""
    if is_complex(element(like)):
        zero = b.op("constant", [], part_type(like), value=dense_splat(0.0, part_type(like)))
        real = b.op("constant", [], part_type(like), value=dense_splat(value, part_type(like)))
        return compose(b, real, zero, like)
    return b.splat(value, like)


def horner(b, x, coefficients):
    """c0 x^n + c1 x^(n-1) + ... + cn, by Horner's rule."""
    acc = const(b, coefficients[0], x)
    for c in coefficients[1:]:
        acc = b.add(b.multiply(acc, x), const(b, c, x))
    return acc


def abs_(b, x):
    return b.unary("abs", x)


def log(b, x):
    return b.unary("log", x)


def log1p(b, x):
    return b.unary("log_plus_one", x)


def exp(b, x):
    return b.unary("exponential", x)


def sqrt(b, x):
    return b.unary("sqrt", x)


def floor(b, x):
    return b.unary("floor", x)


def clamp(b, low, x, high):
    return b.op("clamp", [const(b, low, x), x, const(b, high, x)], x.type)


def atan2(b, y, x):
    return b.binary("atan2", y, x)


def logical(b, name, p, q):
    return b.op(name, [p, q], p.type)


def int_compare(b, x, y, direction):
    return b.compare(x, y, direction, "SIGNED")


LOG_HALF = math.log(0.5)
LOG_TWO = math.log(2.0)
LOG_PI = math.log(math.pi)
LOG_SQRT_TWO_PI = 0.5 * math.log(2 * math.pi)


# ---------------------------------------------------------------- predicates


@chlo_rule("is_inf")
def is_inf(b, op):
    """|x| == inf."""
    x = op.operands[0]
    return [b.compare(abs_(b, x), const(b, float("inf"), x), "EQ")]


@chlo_rule("is_pos_inf")
def is_pos_inf(b, op):
    """x == +inf."""
    x = op.operands[0]
    return [b.compare(x, const(b, float("inf"), x), "EQ")]


@chlo_rule("is_neg_inf")
def is_neg_inf(b, op):
    """x == -inf."""
    x = op.operands[0]
    return [b.compare(x, const(b, float("-inf"), x), "EQ")]


# ---------------------------------------------------------------- constants


@chlo_rule("constant_like")
def constant_like(b, op):
    """A splat of the scalar `value` shaped like the operand (result type)."""
    value = op.attributes["value"]
    result_type = op.results[0].type
    if isinstance(value, ir.FloatAttr):
        scalar = ir.FloatAttr(value).value
    elif isinstance(value, ir.IntegerAttr):
        scalar = ir.IntegerAttr(value).value
    elif isinstance(value, ir.BoolAttr):
        scalar = ir.BoolAttr(value).value
    else:
        scalar = ir.DenseElementsAttr(value).get_splat_value()
        scalar = scalar.value
    like = op.results[0]
    return [b.op("constant", [], result_type, value=dense_splat(scalar, like.type))]


@chlo_rule("constant")
def constant(b, op):
    """chlo.constant holds a dense elements attribute, like stablehlo.constant."""
    return [b.op("constant", [], op.results[0].type, value=op.attributes["value"])]


# ---------------------------------------------------------------- trigonometric / hyperbolic


@chlo_rule("tan")
def tan(b, op):
    """tan(x) is an HLO op of its own."""
    return [b.unary("tan", op.operands[0])]


@chlo_rule("sinh")
def sinh(b, op):
    """sinh(x): for |x| < 1, with m = expm1(x), (m + m / (m + 1)) / 2 (no cancellation);
    else e^(x + log 1/2) - e^(log 1/2 - x) (no premature overflow). Complex x always takes
    the second form, as StableHLO's chlo legalization does."""

    def large(b, x):
        return b.subtract(exp(b, b.add(x, const(b, LOG_HALF, x))), exp(b, b.subtract(const(b, LOG_HALF, x), x)))

    def compute(b, x):
        m = b.unary("exponential_minus_one", x)
        one = const(b, 1.0, x)
        small = b.multiply(const(b, 0.5, x), b.add(m, b.divide(m, b.add(m, one))))
        return b.select(b.compare(abs_(b, x), one, "LT"), small, large(b, x))

    x = op.operands[0]
    if is_complex(element(x)):
        return [large(b, x)]
    return [in_f32(b, compute, x)]


@chlo_rule("cosh")
def cosh(b, op):
    """cosh(x) = e^(x + log 1/2) + e^(log 1/2 - x)."""

    def compute(b, x):
        return b.add(exp(b, b.add(x, const(b, LOG_HALF, x))), exp(b, b.subtract(const(b, LOG_HALF, x), x)))

    return [in_f32(b, compute, op.operands[0])]


def sqrt_one_minus_square(b, x):
    """sqrt((1 - x)(1 + x)) = sqrt(1 - x^2) without cancellation near |x| = 1."""
    one = const(b, 1.0, x)
    return sqrt(b, b.multiply(b.subtract(one, x), b.add(one, x)))


@chlo_rule("asin")
def asin(b, op):
    """asin(x) = 2 atan2(x, 1 + sqrt(1 - x^2)); complex x: see complex_asin."""
    x = op.operands[0]
    if is_complex(element(x)):
        return [complex_asin(b, x)]
    half = atan2(b, x, b.add(const(b, 1.0, x), sqrt_one_minus_square(b, x)))
    return [b.add(half, half)]


@chlo_rule("acos")
def acos(b, op):
    """acos(x) = atan2(sqrt(1 - x^2), x); complex x: see complex_acos."""
    x = op.operands[0]
    if is_complex(element(x)):
        return [complex_acos(b, x)]
    return [atan2(b, sqrt_one_minus_square(b, x), x)]


@chlo_rule("atan")
def atan(b, op):
    """atan(x) = atan2(x, 1); complex x: see complex_atan."""
    x = op.operands[0]
    if is_complex(element(x)):
        return [complex_atan(b, x)]
    return [atan2(b, x, const(b, 1.0, x))]


@chlo_rule("asinh")
def asinh(b, op):
    """asinh(x) = sign(x) log(|x| + sqrt(x^2 + 1)), as log1p(|x| + x^2 / (1 + sqrt(1 + x^2)));
    for |x| >= sqrt(max) (where x^2 overflows) log 2 + log |x|. Complex x: see complex_asinh."""
    x = op.operands[0]
    if is_complex(element(x)):
        return [complex_asinh(b, x)]
    a = abs_(b, x)
    huge = b.compare(a, sqrt(b, const(b, float_max(element(x)), x)), "GE")
    large = b.add(log(b, const(b, 2.0, x)), log(b, a))
    one = const(b, 1.0, x)
    square = b.multiply(a, a)
    small = log1p(b, b.add(a, b.divide(square, b.add(one, sqrt(b, b.add(one, square))))))
    return [b.multiply(b.unary("sign", x), b.select(huge, large, small))]


@chlo_rule("acosh")
def acosh(b, op):
    """acosh(x) = log(x + sqrt(x^2 - 1)) = log1p(sqrt(x - 1) (sqrt(x + 1) + sqrt(x - 1)));
    for x >= max/2, log 2 + log x. Nan below 1 (from the square root). Complex x: see
    complex_acosh."""
    x = op.operands[0]
    if is_complex(element(x)):
        return [complex_acosh(b, x)]
    two = const(b, 2.0, x)
    huge = b.compare(x, b.divide(const(b, float_max(element(x)), x), two), "GE")
    large = b.add(log(b, two), log(b, x))
    one = const(b, 1.0, x)
    below = sqrt(b, b.subtract(x, one))
    small = log1p(b, b.multiply(below, b.add(sqrt(b, b.add(x, one)), below)))
    return [b.select(huge, large, small)]


@chlo_rule("atanh")
def atanh(b, op):
    """atanh(x) = (log1p(x) - log1p(-x)) / 2; nan for |x| > 1. Complex x: see complex_atanh."""
    x = op.operands[0]
    if is_complex(element(x)):
        return [complex_atanh(b, x)]
    outside = b.compare(abs_(b, x), const(b, 1.0, x), "GT")
    value = b.multiply(b.subtract(log1p(b, x), log1p(b, b.negate(x))), const(b, 0.5, x))
    return [b.select(outside, const(b, float("nan"), x), value)]


@chlo_rule("square")
def square(b, op):
    """x * x; for complex x + iy, ((x - y)(x + y), 2xy), with a real part of exactly 0 where
    |x| = |y| (finite), as StableHLO's chlo decomposition computes it."""
    z = op.operands[0]
    if not is_complex(element(z)):
        return [b.multiply(z, z)]
    x, y = parts(b, z)
    equal = logical(b, "and", b.op("is_finite", [x], i1_like(x)), b.compare(abs_(b, x), abs_(b, y), "EQ"))
    real = b.select(equal, const(b, 0.0, x), b.multiply(b.subtract(x, y), b.add(x, y)))
    return [compose(b, real, b.multiply(const(b, 2.0, x), b.multiply(x, y)), z)]


# ---------------------------------------------------------------- complex inverse functions
#
# StableHLO's chlo decompositions for complex operands, which XLA applies
# (stablehlo/transforms/ChloDecompositionPatternsMath.td, generated by pearu's
# functional_algorithms): a modified Hull et al. algorithm ("Implementing the complex
# arcsine and arccosine functions using exception handling", ACM TOMS 23(3), 1997) behind
# asin, acos, asinh and acosh, and a log1p form of atanh behind atanh and atan.

SQRT_TWO = 1.4142135623730951


def float_info(x: ir.Value) -> np.finfo:
    return np.finfo(np.float64 if is_f64(element(x)) else np.float32)


def hypot(b, x, y):
    """sqrt(x^2 + y^2) for non-negative x, y without overflow: m sqrt(1 + r) with m, n the
    larger and smaller and r = (n/m)^2; m + m r / 2 where 1 + r rounds to 1 although r > 0;
    sqrt(2) m where x = y."""
    one = const(b, 1.0, x)
    larger, smaller = b.maximum(x, y), b.minimum(x, y)
    ratio = b.divide(smaller, larger)
    r = b.multiply(ratio, ratio)
    root = sqrt(b, b.add(one, r))
    rounds_to_one = logical(b, "and", b.compare(root, one, "EQ"), b.compare(r, const(b, 0.0, x), "GT"))
    general = b.select(rounds_to_one, b.add(larger, b.divide(b.multiply(larger, r), const(b, 2.0, x))),
                       b.multiply(larger, root))
    return b.select(b.compare(larger, smaller, "EQ"), b.multiply(const(b, SQRT_TWO, x), larger), general)


def asin_acos_kernel(b, real, imag):
    """The parts of w = sqrt(a^2 - x^2) + i log(a + sqrt(a^2 - 1)) for x = |real|, y = |imag|,
    a = (hypot(x + 1, y) + hypot(x - 1, y)) / 2: asin(z) = atan2(x, w.real) + i w.imag up to
    signs (Hull et al. with their regions merged; safe_max = sqrt(max) / 8).

    w.real: y where max(x, y) >= safe_max (Hull's case 5), else sqrt(a^2 - x^2) as
    sqrt((a + x)/2 (y^2 / (r + x + 1) + s - (x - 1))) for x <= 1 and
    y sqrt((a + x)/2 (1 / (r + x + 1) + 1 / (s + x - 1))) beyond (r, s the two hypots).
    w.imag: log 2 + log m + log1p((x/y)^2)/2 for huge m = max(x, y) (thresholds widened by
    1e-6 / 1e2 to cover Hull's case 4); y / sqrt((a - 1)(a + 1)) for y < sqrt(min normal) * 4
    and x < 1; else log1p(a - 1 + sqrt((a - 1)(a + 1))), with a - 1 from Hull's Fig. 2
    forms (no cancellation)."""
    x, y = abs_(b, real), abs_(b, imag)

    def c(value):
        return const(b, value, x)

    one, half = c(1.0), c(0.5)
    safe_max = b.divide(sqrt(b, c(float(float_info(x).max))), c(8.0))
    x_plus_one, x_minus_one = b.add(x, one), b.subtract(x, one)
    r, s = hypot(b, abs_(b, x_plus_one), y), hypot(b, abs_(b, x_minus_one), y)
    a = b.multiply(half, b.add(r, s))
    half_a_plus_x = b.multiply(half, b.add(a, x))
    yy = b.multiply(y, y)
    r_plus = b.add(r, x_plus_one)
    s_minus, s_plus = b.subtract(s, x_minus_one), b.add(s, x_minus_one)

    inside_unit = sqrt(b, b.multiply(half_a_plus_x, b.add(b.divide(yy, r_plus), s_minus)))
    outside_unit = b.multiply(y, sqrt(b, b.add(b.divide(half_a_plus_x, r_plus), b.divide(half_a_plus_x, s_plus))))
    w_real = b.select(b.compare(b.maximum(x, y), safe_max, "GE"), y,
                      b.select(b.compare(x, one, "LE"), inside_unit, outside_unit))

    safe_max_opt = b.select(b.compare(x, b.multiply(safe_max, c(1e12)), "LT"),
                            b.multiply(safe_max, c(1e-6)), b.multiply(safe_max, c(1e2)))
    y_large = b.compare(y, safe_max_opt, "GE")
    m = b.select(y_large, y, x)
    huge = b.compare(m, b.select(y_large, safe_max_opt, safe_max), "GE")
    y_finite = b.unary("not", b.compare(y, c(float("inf")), "EQ"))
    x_over_y = b.select(logical(b, "and", y_large, y_finite), b.divide(x, y), c(0.0))
    far = b.add(b.add(log(b, c(2.0)), log(b, m)), b.multiply(half, log1p(b, b.multiply(x_over_y, x_over_y))))
    safe_min = b.multiply(sqrt(b, c(float(float_info(x).tiny))), c(4.0))
    tiny_y = logical(b, "and", b.compare(y, safe_min, "LT"), b.compare(x, one, "LT"))
    a_plus_one = b.add(a, one)
    half_yy = b.multiply(half, yy)
    half_yy_over_r_plus = b.divide(half_yy, r_plus)
    a_minus_one = b.select(
        tiny_y,
        b.negate(b.divide(b.multiply(x_plus_one, x_minus_one), a_plus_one)),
        b.select(b.compare(x, one, "GE"), b.add(half_yy_over_r_plus, b.multiply(half, s_plus)),
                 b.select(b.compare(a, c(1.5), "LE"), b.add(half_yy_over_r_plus, b.divide(half_yy, s_minus)),
                          b.subtract(a, one))))
    root = sqrt(b, b.multiply(a_minus_one, a_plus_one))
    w_imag = b.select(huge, far, b.select(tiny_y, b.divide(y, root), log1p(b, b.add(a_minus_one, root))))
    return w_real, w_imag


def negative(b, x):
    return b.compare(x, const(b, 0.0, x), "LT")


def complex_asin(b, z):
    """asin(z) = atan2(z.real, w.real) + i sign(z.imag) w.imag, w = asin_acos_kernel(z)."""
    x, y = parts(b, z)
    w_real, w_imag = asin_acos_kernel(b, x, y)
    return compose(b, atan2(b, x, w_real), b.select(negative(b, y), b.negate(w_imag), w_imag), z)


def complex_acos(b, z):
    """acos(z) = atan2(w.real, z.real) - i sign(z.imag) w.imag, w = asin_acos_kernel(z)."""
    x, y = parts(b, z)
    w_real, w_imag = asin_acos_kernel(b, x, y)
    return compose(b, atan2(b, w_real, x), b.select(negative(b, y), w_imag, b.negate(w_imag)), z)


def complex_asinh(b, z):
    """asinh(z) = -i asin(iz) = sign(z.real) w.imag + i atan2(z.imag, w.real),
    w = asin_acos_kernel(iz) (the kernel reads |parts|, so iz = -y + ix gives (y, x))."""
    x, y = parts(b, z)
    w_real, w_imag = asin_acos_kernel(b, y, x)
    return compose(b, b.select(negative(b, x), b.negate(w_imag), w_imag), atan2(b, y, w_real), z)


def complex_acosh(b, z):
    """acosh(z) = +-i acos(z) = w.imag + i sign(z.imag) atan2(w.real, z.real),
    w = asin_acos_kernel(z)."""
    x, y = parts(b, z)
    w_real, w_imag = asin_acos_kernel(b, x, y)
    angle = atan2(b, w_real, x)
    return compose(b, w_imag, b.select(negative(b, y), b.negate(angle), angle), z)


def atanh_parts(b, x, y):
    """The parts of atanh(x + iy) = (log1p(z) - log1p(-z)) / 2:
        real: sign(x) log1p(4 |x| / ((|x| - 1)^2 + y^2)) / 4,
        imag: atan2(2y, (1 - |x|)(1 + |x|) - y^2) / 2,
    while |x| and |y| are below safe_max = (1/epsneg)^2; beyond, the real part's argument
    is 1/|x| where |y| / epsneg < |x|, 0 at infinities, else 1/(|x|/y + y/|x|)/y, and the
    imaginary part sign(y) pi / 2."""

    def c(value):
        return const(b, value, x)

    one = c(1.0)
    ax, ay = abs_(b, x), abs_(b, y)
    inverse_negative_epsilon = c(9007199254740994.0 if is_f64(element(x)) else 16777218.0)
    safe_max = b.multiply(inverse_negative_epsilon, inverse_negative_epsilon)
    in_safe_region = logical(b, "and", b.compare(ax, safe_max, "LT"), b.compare(ay, safe_max, "LT"))
    one_minus_ax = b.subtract(one, ax)
    yy = b.multiply(y, y)
    infinite = logical(b, "or", logical(b, "or", b.compare(x, c(float("inf")), "EQ"), b.compare(x, c(float("-inf")), "EQ")),
                       logical(b, "or", b.compare(y, c(float("inf")), "EQ"), b.compare(y, c(float("-inf")), "EQ")))
    far = b.select(b.compare(b.multiply(ay, inverse_negative_epsilon), ax, "LT"), b.divide(one, ax),
                   b.select(infinite, c(0.0), b.divide(b.divide(one, b.add(b.divide(ax, y), b.divide(y, ax))), y)))
    argument = b.select(in_safe_region, b.divide(ax, b.add(b.multiply(one_minus_ax, one_minus_ax), yy)), far)
    sign_x = b.select(b.compare(x, c(0.0), "GE"), one, c(-1.0))
    real = b.multiply(b.multiply(sign_x, log1p(b, b.multiply(c(4.0), argument))), c(0.25))
    sign_y = b.select(b.compare(y, c(0.0), "GE"), one, c(-1.0))
    angle = b.select(in_safe_region, atan2(b, b.add(y, y), b.subtract(b.multiply(one_minus_ax, b.add(one, ax)), yy)),
                     b.multiply(sign_y, c(math.pi)))
    return real, b.multiply(angle, c(0.5))


def complex_atanh(b, z):
    """atanh(z) (see atanh_parts)."""
    real, imag = atanh_parts(b, *parts(b, z))
    return compose(b, real, imag, z)


def complex_atan(b, z):
    """atan(z) = -i atanh(iz): with w = atanh(-y + ix), atan(z) = w.imag - i w.real."""
    x, y = parts(b, z)
    w_real, w_imag = atanh_parts(b, b.negate(y), x)
    return compose(b, w_imag, b.negate(w_real), z)


# ---------------------------------------------------------------- erf family

# Eigen's rational interpolant, which XLA:CPU's erf intrinsic emits for f32
# (xla/codegen/intrinsic/erf.cc): erf(x) ~ x A(x^2) / B(x^2), and +-1 from ERF32_SATURATED on.
ERF32_A = [0.00022905065861350646, 0.0034082910107109506, 0.050955695062380861, 0.18520832239976145,
           1.128379143519084]
ERF32_B = [-1.1791602954361697e-7, 0.000023547966471313185, 0.0010179625278914885, 0.014070470171167667,
           0.11098505178285362, 0.49746925110067538, 1.0]
ERF32_SATURATED = 3.832506856900711  # erf(x) rounds to 1 in f32 from here on
# Cephes erff: erf(x) ~ x T(x^2) for |x| < 1 (single precision).
ERFF_T = [7.853861353153693e-5, -8.010193625184903e-4, 5.188327685732524e-3, -2.685381193529856e-2,
          1.128358514861418e-1, -3.761262582423300e-1, 1.128379165726710e0]
# Cephes erfcf: erfc(x) ~ e^(-x^2) / x P(1/x^2) for 1 <= x < 2, R(1/x^2) beyond.
ERFCF_P = [2.326819970068386e-2, -1.387039388740657e-1, 3.687424674597105e-1, -5.824733027278666e-1,
           6.210004621745983e-1, -4.944515323274145e-1, 3.404879937665872e-1, -2.741127028184656e-1,
           5.638259427386472e-1]
ERFCF_R = [-1.047766399936249e1, 1.297719955372516e1, -7.495518717768503e0, 2.921019019210786e0,
           -1.015265279202700e0, 4.218463358204948e-1, -2.820767439740514e-1, 5.641895067754075e-1]
# Cephes ndtr.c (double): erf(x) ~ x T(x^2) / U(x^2) for |x| < 1; erfc(x) ~ e^(-x^2) P(|x|)/Q(|x|)
# for |x| < 8, e^(-x^2) R(|x|)/S(|x|) beyond.
ERF64_T = [9.60497373987051638749e0, 9.00260197203842689217e1, 2.23200534594684319226e3,
           7.00332514112805075473e3, 5.55923013010394962768e4]
ERF64_U = [1.0, 3.35617141647503099647e1, 5.21357949780152679795e2, 4.59432382970980127987e3,
           2.26290000613890934246e4, 4.92673942608635921086e4]
ERFC64_P = [2.46196981473530512524e-10, 5.64189564831068821977e-1, 7.46321056442269912687e0,
            4.86371970985681366614e1, 1.96520832956077098242e2, 5.26445194995477358631e2,
            9.34528527171957607540e2, 1.02755188689515710272e3, 5.57535335369399327526e2]
ERFC64_Q = [1.0, 1.32281951154744992508e1, 8.67072140885989742329e1, 3.54937778887819891062e2,
            9.75708501743205489753e2, 1.82390916687909736289e3, 2.24633760818710981792e3,
            1.65666309194161350182e3, 5.57535340817727675546e2]
ERFC64_R = [5.64189583547755073984e-1, 1.27536670759978104416e0, 5.01905042251180477414e0,
            6.16021097993053585195e0, 7.40974269950448939160e0, 2.97886665372100240670e0]
ERFC64_S = [1.0, 2.26052863220117276590e0, 9.39603524938001434673e0, 1.20489539808096656605e1,
            1.70814450747565897222e1, 9.60896809063285878198e0, 3.36907645100081516050e0]
# log of the smallest normal result of exp: below it e^(-x^2) underflows.
LOG_MIN_F32 = -88.72283905206835
LOG_MIN_F64 = -709.78271289338397


def erf_f32(b, x):
    """erf(x) ~ x A(x^2)/B(x^2), its sign beyond ERF32_SATURATED: XLA:CPU's bits, where
    jaxlib's older decomposition clamped x to [-4, 4] and the result to [-1, 1]."""
    x2 = b.multiply(x, x)
    value = b.divide(b.multiply(x, horner(b, x2, ERF32_A)), horner(b, x2, ERF32_B))
    saturated = b.compare(abs_(b, x), const(b, ERF32_SATURATED, x), "GE")
    return b.select(saturated, b.unary("sign", x), value)


def erf_small_f64(b, x):
    """erf(x) = x T(x^2)/U(x^2) for |x| < 1."""
    x2 = b.multiply(x, x)
    return b.divide(b.multiply(x, horner(b, x2, ERF64_T)), horner(b, x2, ERF64_U))


def erfc_large(b, x):
    """erfc for |x| >= 1: e^(-x^2) times a rational function of |x| (f64) or of 1/x^2 over |x|
    (f32); 0 where e^(-x^2) underflows; 2 - erfc(|x|) for negative x."""
    z = b.negate(b.multiply(x, x))
    a = abs_(b, x)
    if is_f64(element(x)):
        e = exp(b, z)
        near = b.divide(b.multiply(e, horner(b, a, ERFC64_P)), horner(b, a, ERFC64_Q))
        far = b.divide(b.multiply(e, horner(b, a, ERFC64_R)), horner(b, a, ERFC64_S))
        y = b.select(b.compare(a, const(b, 8.0, x), "LT"), near, far)
        underflow = LOG_MIN_F64
    else:
        one = const(b, 1.0, x)
        q = b.divide(one, b.multiply(x, x))
        scale = b.multiply(exp(b, z), b.divide(one, a))
        series = b.select(b.compare(a, const(b, 2.0, x), "LT"), horner(b, q, ERFCF_P), horner(b, q, ERFCF_R))
        y = b.multiply(scale, series)
        underflow = LOG_MIN_F32
    zero = const(b, 0.0, x)
    y = b.select(b.compare(z, const(b, underflow, x), "LT"), zero, y)
    return b.select(b.compare(x, zero, "LT"), b.subtract(const(b, 2.0, x), y), y)


def erfc_value(b, x):
    """erfc(x) = 1 - erf(x) for |x| < 1, else the asymptotic rational form."""
    one = const(b, 1.0, x)
    if is_f64(element(x)):
        small = b.subtract(one, erf_small_f64(b, x))
    else:
        small = b.subtract(one, b.multiply(x, horner(b, b.multiply(x, x), ERFF_T)))
    return b.select(b.compare(abs_(b, x), one, "LT"), small, erfc_large(b, x))


@chlo_rule("erf")
def erf(b, op):
    """erf(x) = 2/sqrt(pi) int_0^x e^(-t^2) dt. f32: one rational approximation on [-4, 4]
    (erf is 1 to f32 precision beyond). f64: x T(x^2)/U(x^2) for |x| < 1, else 1 - erfc(x)."""

    def compute(b, x):
        if not is_f64(element(x)):
            return erf_f32(b, x)
        one = const(b, 1.0, x)
        return b.select(b.compare(abs_(b, x), one, "LT"), erf_small_f64(b, x), b.subtract(one, erfc_large(b, x)))

    return [in_f32(b, compute, op.operands[0])]


@chlo_rule("erfc")
def erfc(b, op):
    """erfc(x) = 1 - erf(x): 1 - x T(x^2) near 0, e^(-x^2) R(.) for |x| >= 1 (no cancellation)."""
    return [in_f32(b, erfc_value, op.operands[0])]


# Giles, "Approximating the erfinv function" (2010): erfinv(x) = x p(w), w = -log(1 - x^2).
GILES32_SMALL = [2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                 -0.00125372503, -0.00417768164, 0.246640727, 1.50140941]
GILES32_LARGE = [-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                 -0.0076224613, 0.00943887047, 1.00167406, 2.83297682]
GILES64_SMALL = [-3.6444120640178196996e-21, -1.685059138182016589e-19, 1.2858480715256400167e-18,
                 1.115787767802518096e-17, -1.333171662854620906e-16, 2.0972767875968561637e-17,
                 6.6376381343583238325e-15, -4.0545662729752068639e-14, -8.1519341976054721522e-14,
                 2.6335093153082322977e-12, -1.2975133253453532498e-11, -5.4154120542946279317e-11,
                 1.051212273321532285e-09, -4.1126339803469836976e-09, -2.9070369957882005086e-08,
                 4.2347877827932403518e-07, -1.3654692000834678645e-06, -1.3882523362786468719e-05,
                 0.0001867342080340571352, -0.00074070253416626697512, -0.0060336708714301490533,
                 0.24015818242558961693, 1.6536545626831027356]
GILES64_MEDIUM = [2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
                  1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
                  2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
                  6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
                  0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
                  -0.0037512085075692412107, 0.005370914553590063617, 1.0052589676941592334,
                  3.0838856104922207635]
GILES64_LARGE = [-2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
                 -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
                 2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
                 -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
                 7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
                 1.0103004648645343977, 4.8499064014085844221]


@chlo_rule("erf_inv")
def erf_inv(b, op):
    """erfinv(x) = x p(w) with w = -log1p(-x^2) (Giles): f32 uses two polynomials (w < 5 in
    w - 2.5, else in sqrt(w) - 3), f64 three (w < 6.25, < 16, else); +-inf at x = +-1."""

    def compute(b, x):
        w = b.negate(log1p(b, b.multiply(x, b.negate(x))))
        root = sqrt(b, w)
        if is_f64(element(x)):
            p_small = horner(b, b.subtract(w, const(b, 3.125, x)), GILES64_SMALL)
            p_medium = horner(b, b.subtract(root, const(b, 3.25, x)), GILES64_MEDIUM)
            p_large = horner(b, b.subtract(root, const(b, 5.0, x)), GILES64_LARGE)
            p = b.select(
                b.compare(w, const(b, 6.25, x), "LT"),
                p_small,
                b.select(b.compare(w, const(b, 16.0, x), "LT"), p_medium, p_large),
            )
        else:
            p_small = horner(b, b.subtract(w, const(b, 2.5, x)), GILES32_SMALL)
            p_large = horner(b, b.subtract(root, const(b, 3.0, x)), GILES32_LARGE)
            p = b.select(b.compare(w, const(b, 5.0, x), "LT"), p_small, p_large)
        value = b.multiply(p, x)
        at_one = b.compare(abs_(b, x), const(b, 1.0, x), "EQ")
        return b.select(at_one, b.multiply(x, const(b, float("inf"), x)), value)

    return [in_f32(b, compute, op.operands[0])]


# ---------------------------------------------------------------- gamma family

# Lanczos approximation, g = 7, n = 9 (Numerical Recipes / Godfrey's coefficients).
LANCZOS_G = 7.0
LANCZOS_BASE = 0.99999999999980993
LANCZOS = [676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
           12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7]


def reflect_argument(b, x):
    """(x < 1/2, z) with z = -x for reflected inputs, x - 1 otherwise."""
    reflect = b.compare(x, const(b, 0.5, x), "LT")
    z = b.select(reflect, b.negate(x), b.subtract(x, const(b, 1.0, x)))
    return reflect, z


def lanczos_log_t(b, z):
    """t = g + 1/2 + z and log t = log(g + 1/2) + log1p(z / (g + 1/2))."""
    g_half = LANCZOS_G + 0.5
    t = b.add(const(b, g_half, z), z)
    log_t = b.add(const(b, math.log(g_half), z), log1p(b, b.divide(z, const(b, g_half, z))))
    return t, log_t


def lgamma_value(b, x):
    """log|Gamma(x)|: Lanczos for x >= 1/2,
        log Gamma(z + 1) = log sqrt(2 pi) + (z + 1/2 - t / log t) log t + log A(z)
    (the (z + 1/2) log t - t of the formula, arranged to avoid overflow), A(z) = c0 + sum
    c_i / (z + i); below 1/2 the reflection log pi - log|sin(pi x)| - lgamma(1 - x), +inf at the
    poles (non-positive integers) and at +-inf."""
    reflect, z = reflect_argument(b, x)
    series = const(b, LANCZOS_BASE, x)
    for i, c in enumerate(LANCZOS):
        series = b.add(series, b.divide(const(b, c, x), b.add(z, const(b, i + 1.0, x))))
    t, log_t = lanczos_log_t(b, z)
    half = const(b, 0.5, x)
    body = b.multiply(b.subtract(b.add(z, half), b.divide(t, log_t)), log_t)
    log_y = b.add(b.add(const(b, LOG_SQRT_TWO_PI, x), body), log(b, series))

    a = abs_(b, x)
    frac = b.subtract(a, floor(b, a))
    reduced = b.select(b.compare(half, frac, "LT"), b.subtract(const(b, 1.0, x), frac), frac)
    log_sin = log(b, b.unary("sine", b.multiply(const(b, math.pi, x), reduced)))
    reflection = b.select(
        b.op("is_finite", [log_sin], ir.RankedTensorType.get(shape(x), ir.IntegerType.get_signless(1))),
        b.subtract(b.subtract(const(b, LOG_PI, x), log_sin), log_y),
        b.negate(log_sin),
    )
    result = b.select(reflect, reflection, log_y)
    inf = const(b, float("inf"), x)
    return b.select(b.compare(a, inf, "EQ"), inf, result)


@chlo_rule("lgamma")
def lgamma(b, op):
    """log|Gamma(x)| by the Lanczos approximation with reflection (see lgamma_value)."""
    return [in_f32(b, lgamma_value, op.operands[0])]


def digamma_value(b, x):
    """psi(x) = d/dx log Gamma(x): differentiating the Lanczos form,
        psi(z + 1) = log t + A'(z)/A(z) - g / t,  A'(z) = -sum c_i / (z + i)^2;
    below 1/2 the reflection psi(x) - pi cot(pi x); nan at the poles (non-positive integers)."""
    reflect, z = reflect_argument(b, x)
    num = const(b, 0.0, x)
    den = const(b, LANCZOS_BASE, x)
    for i, c in enumerate(LANCZOS):
        zi = b.add(z, const(b, i + 1.0, x))
        num = b.subtract(num, b.divide(const(b, c, x), b.multiply(zi, zi)))
        den = b.add(den, b.divide(const(b, c, x), zi))
    t, log_t = lanczos_log_t(b, z)
    y = b.subtract(b.add(log_t, b.divide(num, den)), b.divide(const(b, LANCZOS_G, x), t))

    shifted = b.add(x, abs_(b, floor(b, b.add(x, const(b, 0.5, x)))))
    angle = b.multiply(const(b, math.pi, x), shifted)
    cot = b.divide(b.multiply(const(b, math.pi, x), b.unary("cosine", angle)), b.unary("sine", angle))
    result = b.select(reflect, b.subtract(y, cot), y)
    pole = logical(b, "and", b.compare(x, const(b, 0.0, x), "LE"), b.compare(x, floor(b, x), "EQ"))
    return b.select(pole, const(b, float("nan"), x), result)


@chlo_rule("digamma")
def digamma(b, op):
    """psi(x), the logarithmic derivative of Gamma (see digamma_value)."""
    return [in_f32(b, digamma_value, op.operands[0])]


# ---------------------------------------------------------------- next_after


@chlo_rule("next_after")
def next_after(b, op):
    """The float after x in the direction of y, on the bit patterns: moving away from zero adds
    one to the magnitude bits, toward zero subtracts one; from +-0 the result is the smallest
    subnormal with y's sign; x == y gives y; nan if either is nan."""
    x, y = op.operands[0], op.operands[1]
    bits = float_bits(element(x))
    int_type = ir.RankedTensorType.get(shape(x), ir.IntegerType.get_signless(bits))
    xi = b.op("bitcast_convert", [x], int_type)
    yi = b.op("bitcast_convert", [y], int_type)

    def ic(value):
        return b.op("constant", [], int_type, value=ir.DenseElementsAttr.get_splat(
            int_type, ir.IntegerAttr.get(ir.IntegerType.get_signless(bits), value)))

    sign_bit = ic(-(1 << (bits - 1)))
    magnitude_mask = ic((1 << (bits - 1)) - 1)
    x_mag = logical(b, "and", xi, magnitude_mask)
    y_mag = logical(b, "and", yi, magnitude_mask)
    x_sign = logical(b, "and", xi, sign_bit)
    y_sign = logical(b, "and", yi, sign_bit)
    zero, one = ic(0), ic(1)
    smallest_toward_y = logical(b, "or", y_sign, one)
    toward_zero = logical(b, "or", int_compare(b, x_mag, y_mag, "GT"), int_compare(b, x_sign, y_sign, "NE"))
    step = b.select(toward_zero, ic(-1), one)
    stepped = b.add(xi, step)
    from_zero = b.select(int_compare(b, y_mag, zero, "EQ"), yi, smallest_toward_y)
    result = b.select(int_compare(b, x_mag, zero, "EQ"), from_zero, stepped)
    result = b.select(b.compare(x, y, "EQ"), yi, result)
    nan = b.op("bitcast_convert", [const(b, float("nan"), x)], int_type)
    either_nan = logical(b, "or", b.compare(x, x, "NE"), b.compare(y, y, "NE"))
    result = b.select(either_nan, nan, result)
    return [b.op("bitcast_convert", [result], x.type)]


# ---------------------------------------------------------------- top_k


@chlo_rule("top_k")
def top_k(b, op):
    """The k largest along the last dimension with their indices: sort (operand, iota) by
    operand descending (total order, stable so ties keep index order), slice the first k."""
    from mlirxla.dialects.xhlo.builder import create_op

    x = op.operands[0]
    k = ir.IntegerAttr(op.attributes["k"]).value
    dims = shape(x)
    last = len(dims) - 1
    index_element = element(op.results[1])
    index_type = ir.RankedTensorType.get(dims, index_element)
    iota = b.op("iota", [], index_type, iota_dimension=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), last))
    sort = create_op(
        "xhlo.sort",
        [x, iota],
        [x.type, index_type],
        {
            "dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), last),
            "is_stable": ir.BoolAttr.get(True),
        },
        b.location,
        region_count=1,
    )
    scalar = ir.RankedTensorType.get([], element(x))
    index_scalar = ir.RankedTensorType.get([], index_element)
    block = sort.regions[0].blocks.append(scalar, scalar, index_scalar, index_scalar)
    with ir.InsertionPoint(block):
        compare_type = "TOTALORDER" if isinstance(element(x), ir.FloatType) else (
            "UNSIGNED" if ir.IntegerType(element(x)).is_unsigned else "SIGNED")
        greater = b.compare(block.arguments[0], block.arguments[1], "GT", compare_type)
        create_op("xhlo.return", [greater], [], {}, b.location)
    limits = dims[:-1] + [k]
    slice_attrs = dict(
        start_indices=ir.DenseI64ArrayAttr.get([0] * len(dims)),
        limit_indices=ir.DenseI64ArrayAttr.get(limits),
        strides=ir.DenseI64ArrayAttr.get([1] * len(dims)),
    )
    values = b.op("slice", [sort.results[0]], op.results[0].type, **slice_attrs)
    indices = b.op("slice", [sort.results[1]], op.results[1].type, **slice_attrs)
    return [values, indices]


# ---------------------------------------------------------------- Bessel

# Cephes i1e Chebyshev coefficients: i1e(x) = x chbevl(x/2 - 2, A) on [0, 8] and
# chbevl(32/x - 2, B) / sqrt(x) beyond (f32 uses the last 17 and 7 of them).
I1E_A = [2.77791411276104639959e-18, -2.11142121435816608115e-17, 1.55363195773620046921e-16,
         -1.10559694773538630805e-15, 7.60068429473540693410e-15, -5.04218550472791168711e-14,
         3.22379336594557470981e-13, -1.98397439776494371520e-12, 1.17361862988909016308e-11,
         -6.66348972350202774223e-11, 3.62559028155211703701e-10, -1.88724975172282928790e-9,
         9.38153738649577178388e-9, -4.44505912879632808065e-8, 2.00329475355213526229e-7,
         -8.56872026469545474066e-7, 3.47025130813767847674e-6, -1.32731636560394358279e-5,
         4.78156510755005422638e-5, -1.61760815825896745588e-4, 5.12285956168575772895e-4,
         -1.51357245063125314899e-3, 4.15642294431288815669e-3, -1.05640848946261981558e-2,
         2.47264490306265168283e-2, -5.29459812080949914269e-2, 1.02643658689847095384e-1,
         -1.76416518357834055153e-1, 2.52587186443633654823e-1]
I1E_B = [7.51729631084210481353e-18, 4.41434832307170791151e-18, -4.65030536848935832153e-17,
         -3.20952592199342395980e-17, 2.96262899764595013876e-16, 3.30820231092092828324e-16,
         -1.88035477551078244854e-15, -3.81440307243700780478e-15, 1.04202769841288027642e-14,
         4.27244001671195135429e-14, -2.10154184277266431302e-14, -4.08355111109219731823e-13,
         -7.19855177624590851209e-13, 2.03562854414708950722e-12, 1.41258074366137813316e-11,
         3.25260358301548823856e-11, -1.89749581235054123450e-11, -5.58974346219658380687e-10,
         -3.83538038596423702205e-9, -2.63146884688951950684e-8, -2.51223623787020892529e-7,
         -3.88256480887769039346e-6, -1.10588938762623716291e-4, -9.76109749136146840777e-3,
         7.78576235018280120474e-1]


def chebyshev(b, y, coefficients):
    """Clenshaw's recurrence for sum' c_i T_i(y/2) as Cephes' chbevl: b0 = y b1 - b2 + c_i,
    result (b0 - b2) / 2."""
    b0 = const(b, 0.0, y)
    b1 = const(b, 0.0, y)
    b2 = const(b, 0.0, y)
    for c in coefficients:
        b2, b1 = b1, b0
        b0 = b.add(b.subtract(b.multiply(y, b1), b2), const(b, c, y))
    return b.multiply(b.subtract(b0, b2), const(b, 0.5, y))


@chlo_rule("bessel_i1e")
def bessel_i1e(b, op):
    """i1e(x) = e^-|x| I1(x), odd in x: Chebyshev series in x/2 - 2 for |x| <= 8 (times |x|) and
    in 32/|x| - 2 beyond (over sqrt|x|)."""

    def compute(b, x):
        wide = is_f64(element(x))
        a_coefficients = I1E_A if wide else I1E_A[-17:]
        b_coefficients = I1E_B if wide else I1E_B[-7:]
        a = abs_(b, x)
        two = const(b, 2.0, x)
        near = b.multiply(a, chebyshev(b, b.subtract(b.multiply(const(b, 0.5, x), a), two), a_coefficients))
        far = b.divide(chebyshev(b, b.subtract(b.divide(const(b, 32.0, x), a), two), b_coefficients), sqrt(b, a))
        value = b.select(b.compare(a, const(b, 8.0, x), "LE"), near, far)
        return b.multiply(b.unary("sign", x), value)

    return [in_f32(b, compute, op.operands[0])]


# ---------------------------------------------------------------- zeta, polygamma

# 1 / A_j of Cephes' zeta: A_j = (2j)! / B_2j, the Euler-Maclaurin coefficients.
ZETA_A = [12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
          -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
          1.8152105401943546773e17, -7.1661652561756670113e18]
ZETA_TERMS = 10


def zeta_value(b, x, q):
    """Hurwitz zeta(x, q) = sum_k (q + k)^-x by Euler-Maclaurin: with a = q + N (N = 10),
        sum_{k<N} (q+k)^-x + a^(1-x)/(x-1) + a^-x (1/2 + sum_j B_2j/(2j)! x(x+1)...(x+2j-2)/a^(2j-1));
    the tail is skipped when a^-x is negligible; nan for x < 1 or (q <= 0 with x not an
    integer); at non-positive integer q: +inf for even integer x, else nan; +inf at x = 1."""
    minus_x = b.negate(x)
    one = const(b, 1.0, x)
    power = b.binary("power", q, minus_x)
    total = power
    a = q
    for _ in range(ZETA_TERMS - 1):
        a = b.add(a, one)
        total = b.add(total, b.binary("power", a, minus_x))
    a = b.add(a, one)
    a_power = b.binary("power", a, minus_x)
    tail = b.divide(b.multiply(a_power, a), b.subtract(x, one))
    inverse_square = b.divide(one, b.multiply(a, a))
    acc = const(b, 0.0, x)
    for j in range(len(ZETA_A), 1, -1):
        pair = b.multiply(b.add(x, const(b, 2.0 * j - 2, x)), b.add(x, const(b, 2.0 * j - 3, x)))
        acc = b.multiply(pair, b.multiply(inverse_square, b.add(acc, const(b, 1.0 / ZETA_A[j - 1], x))))
    correction = b.add(const(b, 0.5, x), b.multiply(b.divide(x, a), b.add(const(b, 1.0 / ZETA_A[0], x), acc)))
    full = b.add(b.add(total, tail), b.multiply(a_power, correction))
    tiny = float(np.finfo(np.float64 if is_f64(element(x)) else np.float32).smallest_subnormal)
    negligible = b.compare(abs_(b, a_power), b.multiply(abs_(b, total), const(b, tiny, x)), "LT")
    result = b.select(negligible, total, full)

    nan = const(b, float("nan"), x)
    inf = const(b, float("inf"), x)
    zero = const(b, 0.0, x)
    result = b.select(b.compare(x, one, "LT"), nan, result)
    q_nonpositive = b.compare(q, zero, "LE")
    x_integer = b.compare(x, floor(b, x), "EQ")
    result = b.select(logical(b, "and", q_nonpositive, b.compare(x, floor(b, x), "NE")), nan, result)
    x_even = logical(b, "and", x_integer, b.compare(b.binary("remainder", x, const(b, 2.0, x)), zero, "EQ"))
    at_pole = logical(b, "and", q_nonpositive, b.compare(q, floor(b, q), "EQ"))
    result = b.select(at_pole, b.select(x_even, inf, nan), result)
    return b.select(b.compare(x, one, "EQ"), inf, result)


@chlo_rule("zeta")
def zeta(b, op):
    """Hurwitz zeta(x, q) (see zeta_value)."""
    return [in_f32(b, zeta_value, op.operands[0], op.operands[1])]


def polygamma_value(b, n, x):
    """psi^(n)(x) = (-1)^(n+1) n! zeta(n + 1, x) for integer n >= 1, digamma(x) for n = 0, with
    n! = exp(lgamma(n + 1)); nan for negative or non-integer n."""
    one = const(b, 1.0, n)
    two = const(b, 2.0, n)
    sign = b.subtract(b.multiply(two, b.binary("remainder", n, two)), one)
    n_plus_one = b.add(n, one)
    factorial = exp(b, lgamma_value(b, n_plus_one))
    value = b.multiply(b.multiply(sign, factorial), zeta_value(b, n_plus_one, x))
    zero = const(b, 0.0, n)
    value = b.select(b.compare(n, zero, "EQ"), digamma_value(b, x), value)
    invalid = logical(b, "or", b.compare(n, floor(b, n), "NE"), b.compare(n, zero, "LT"))
    return b.select(invalid, const(b, float("nan"), n), value)


@chlo_rule("polygamma")
def polygamma(b, op):
    """The n-th derivative of digamma (see polygamma_value)."""
    return [in_f32(b, polygamma_value, op.operands[0], op.operands[1])]


# ---------------------------------------------------------------- implicitly broadcasting binary ops


def broadcast_to(b, value, result_shape, dimensions=None):
    """value broadcast to result_shape: its dimension i lands on dimensions[i] (by default
    numpy's trailing alignment)."""
    operand_shape = shape(value)
    if operand_shape == list(result_shape):
        return value
    if dimensions is None:
        offset = len(result_shape) - len(operand_shape)
        dimensions = list(range(offset, len(result_shape)))
    target = ir.RankedTensorType.get(list(result_shape), element(value))
    return b.op("broadcast", [value], target, dimensions=ir.DenseI64ArrayAttr.get(list(dimensions)))


def chlo_enum(attribute) -> str:
    """The case of a chlo enum attribute (`#chlo<comparison_direction LT>` -> "LT")."""
    text = str(attribute)
    return text.rstrip(">").split()[-1] if text.startswith("#") else ir.StringAttr(attribute).value


def broadcast_operands(b, op):
    """Both operands broadcast to the result shape; `broadcast_dimensions` maps the lower-rank
    operand's dimensions into the higher rank."""
    lhs, rhs = op.operands[0], op.operands[1]
    result_shape = shape(op.results[0])
    dims = None
    if "broadcast_dimensions" in op.attributes:
        dims = list(ir.DenseI64ArrayAttr(op.attributes["broadcast_dimensions"]))
    low, high = (lhs, rhs) if len(shape(lhs)) < len(shape(rhs)) else (rhs, lhs)
    out = []
    for value in (lhs, rhs):
        use = dims if (value is low and len(shape(low)) != len(shape(high)) and dims is not None) else None
        if use is None and dims is not None and len(shape(value)) == len(result_shape):
            use = list(range(len(result_shape)))
        out.append(broadcast_to(b, value, result_shape, use))
    return out


BROADCAST_BINARY = {
    "add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "divide",
    "maximum": "maximum", "minimum": "minimum", "power": "power", "remainder": "remainder",
    "atan2": "atan2", "and": "and", "or": "or", "xor": "xor", "shift_left": "shift_left",
    "shift_right_arithmetic": "shift_right_arithmetic", "shift_right_logical": "shift_right_logical",
}


def make_broadcast_rule(xhlo_name):
    def rule(b, op):
        lhs, rhs = broadcast_operands(b, op)
        return [b.op(xhlo_name, [lhs, rhs], op.results[0].type)]

    rule.__doc__ = f"lhs {xhlo_name} rhs after broadcasting both to the result shape."
    return rule


for _name, _xhlo in BROADCAST_BINARY.items():
    chlo_rule(f"broadcast_{_name}")(make_broadcast_rule(_xhlo))


@chlo_rule("broadcast_complex")
def broadcast_complex(b, op):
    """complex(re, im) after broadcasting."""
    lhs, rhs = broadcast_operands(b, op)
    return [b.op("complex", [lhs, rhs], op.results[0].type)]


@chlo_rule("broadcast_compare")
def broadcast_compare(b, op):
    """compare(lhs, rhs) after broadcasting; the chlo enums become xhlo's strings."""
    lhs, rhs = broadcast_operands(b, op)
    direction = chlo_enum(op.attributes["comparison_direction"])
    attrs = {"comparison_direction": ir.StringAttr.get(direction)}
    if "compare_type" in op.attributes:
        attrs["compare_type"] = ir.StringAttr.get(chlo_enum(op.attributes["compare_type"]))
    return [b.op("compare", [lhs, rhs], op.results[0].type, **attrs)]


def broadcast_via(rule_value):
    def rule(b, op):
        lhs, rhs = broadcast_operands(b, op)
        return [in_f32(b, rule_value, lhs, rhs)]

    return rule


chlo_rule("broadcast_zeta")(broadcast_via(zeta_value))
chlo_rule("broadcast_polygamma")(broadcast_via(polygamma_value))


@chlo_rule("broadcast_next_after")
def broadcast_next_after(b, op):
    """next_after after broadcasting (the bit-level composition of next_after)."""
    lhs, rhs = broadcast_operands(b, op)

    class Broadcast:
        operands = [lhs, rhs]

    return next_after(b, Broadcast)


@chlo_rule("broadcast_select")
def broadcast_select(b, op):
    """select(pred, on_true, on_false) with all three broadcast to the result shape."""
    result_shape = shape(op.results[0])
    values = [broadcast_to(b, v, result_shape) for v in op.operands]
    return [b.select(*values)]


def integer_like(value: ir.Value, width: int, unsigned: bool) -> ir.Type:
    kind = ir.IntegerType.get_unsigned(width) if unsigned else ir.IntegerType.get_signless(width)
    return ir.RankedTensorType.get(shape(value), kind)


def high_half_unsigned_64(b, x, y):
    """High 64 bits of a 64x64-bit unsigned product from 32-bit halves (x = xh*2^32 + xl)."""
    half, mask = const(b, 32, x), const(b, 0xFFFFFFFF, x)
    xl, xh = b.binary("and", x, mask), b.binary("shift_right_logical", x, half)
    yl, yh = b.binary("and", y, mask), b.binary("shift_right_logical", y, half)
    low_low, low_high = b.multiply(xl, yl), b.multiply(xl, yh)
    high_low, high_high = b.multiply(xh, yl), b.multiply(xh, yh)
    carry = b.add(
        b.add(b.binary("shift_right_logical", low_low, half), b.binary("and", low_high, mask)),
        b.binary("and", high_low, mask),
    )
    high = b.add(high_high, b.add(b.binary("shift_right_logical", low_high, half), b.binary("shift_right_logical", high_low, half)))
    return b.add(high, b.binary("shift_right_logical", carry, half))


@chlo_rule("mulhi")
def mulhi(b, op):
    """High half of the double-width product: widen, multiply, shift right by the width.

    64-bit operands have no wider type: the unsigned high half comes from 32-bit halves, and
    for signed operands hi(x*y) = hi_unsigned(x*y) - (x < 0 ? y : 0) - (y < 0 ? x : 0).
    """
    x, y = op.operands
    integer = ir.IntegerType(element(x))
    width, unsigned = integer.width, integer.is_unsigned
    if width < 64:
        wide_x, wide_y = b.convert(x, ir.IntegerType.get_unsigned(2 * width) if unsigned else ir.IntegerType.get_signless(2 * width)), None
        wide_type = element(wide_x)
        wide_y = b.convert(y, wide_type)
        product = b.multiply(wide_x, wide_y)
        shifted = b.binary("shift_right_logical" if unsigned else "shift_right_arithmetic", product, const(b, width, product))
        return [b.convert(shifted, element(x))]
    if unsigned:
        return [high_half_unsigned_64(b, x, y)]
    as_unsigned = lambda v: b.op("bitcast_convert", [v], integer_like(v, 64, True))
    high = b.op("bitcast_convert", [high_half_unsigned_64(b, as_unsigned(x), as_unsigned(y))], x.type)
    zero = const(b, 0, x)
    high = b.subtract(high, b.select(int_compare(b, x, zero, "LT"), y, zero))
    return [b.subtract(high, b.select(int_compare(b, y, zero, "LT"), x, zero))]
