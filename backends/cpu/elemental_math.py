"""Elementwise math that the upstream lowering computes inaccurately, rewritten in xhlo the way
XLA's elemental IR emitter (xla/service/elemental_ir_emitter.cc) computes it, before a kernel
is lowered to StableHLO:

- real expm1 and log1p: MLIR's convert-math-to-llvm makes `math.expm1` exp(x) - 1 and
  `math.log1p` log(1 + x), which lose every digit near 0 (JAX's testLog1pNearOne found
  log1p(1e-5) 14932 ulp off; chlo.acosh, asinh and atanh, built on log1p, lost with it);
- complex expm1, log1p, tan and tanh: convert-complex-to-standard's formulas cancel when a part
  is small (expm1(1e-8 + 1e-8j) had a real part of -1e-16) and overflow when one is large;
- float to integer converts: `arith.fptosi`/`fptoui` give poison (in practice INT_MIN, or
  wrapped bits) for NaN and for values outside the integer's range; XLA converts with
  saturation (NaN to 0, +-inf and values beyond the range to the integer's max or min, negative
  values to 0 for unsigned), so jax's `x.astype(uint8)` of -2.7 is 0 on its cpu backend;
- complex log, sqrt and rsqrt: the same lowering's |z| overflows (log(-max - max i) was inf) and
  its polar sqrt, like XLA's, loses a small part next to a large one (sqrt(-1.5 - 9.5e-20i) had
  a real part of -5e-8). These follow StableHLO's reference algorithms (the functional_algorithms
  package its math accuracy tests come from) where XLA's lose digits, and C99's special values
  (as numpy and the StableHLO interpreter give them).

f16 and bf16 are computed in f32 and rounded back. The rewritten ops call each other's
algorithms directly (complex log1p uses the real log1p here, not `math.log1p`).
"""

from mlirxla.dialects.xhlo.builder import XhloBuilder
from mlirxla.frontdoor.chlo_rules import (abs_, compose, const, element, float_bits, float_info, horner, hypot, in_f32,
                                          is_complex, is_narrow_float, logical, parts, shape)
from mlirxla.ir_queries import ops_in_dialect
from mlirxla.mlir import ir
from mlirxla.transforms.erasure import erase

# Cephes log1p: log1p(x) = x - x^2/2 + x^3 P(x)/Q(x) for |x| < sqrt(2) - 1 (XLA's Log1p intrinsic).
LOG1P_SMALL = 0.41421356237309504880
# sqrt(1/2) - 1: Cephes' own lower bound for that polynomial (XLA's log1p takes it down to -LOG1P_SMALL).
LOG1P_NEAR_ONE_LOW = -0.29289321881345247560
LOG1P_P = [4.5270000862445199635215e-5, 4.9854102823193375972212e-1, 6.5787325942061044846969e0,
           2.9911919328553073277375e1, 6.0949667980987787057556e1, 5.7112963590585538103336e1,
           2.0039553499201281259648e1]
LOG1P_Q = [1.0, 1.5062909083469192043167e1, 8.3047565967967209469434e1, 2.2176239823732856465394e2,
           3.0909872225312059774938e2, 2.1642788614495947685003e2, 6.0118660497603843919306e1]
# Cephes cosm1: cos(x) - 1 = -x^2/2 + x^4 C(x^2) for x^2 <= (pi/4)^2 (XLA's EmitCosm1).
COSM1_C = [4.7377507964246204691685e-14, -1.1470284843425359765671e-11, 2.0876754287081521758361e-9,
           -2.7557319214999787979814e-7, 2.4801587301570552304991e-5, -1.3888888888888872993737e-3,
           4.1666666666666666609054e-2]
COSM1_SMALL_SQUARE = 0.61685


def expm1(b, x):
    """e^x - 1 (XLA's EmitExpm1): tanh(x/2) (e^x + 1) for |x| <= 1/2, which keeps the digits
    exp(x) - 1 cancels; exp(x) - 1 beyond; x itself where x/2 underflows to 0."""
    half = b.multiply(x, const(b, 0.5, x))
    e = b.unary("exponential", x)
    near_zero = b.multiply(b.unary("tanh", half), b.add(e, const(b, 1.0, x)))
    value = b.select(b.compare(abs_(b, x), const(b, 0.5, x), "GT"), b.subtract(e, const(b, 1.0, x)), near_zero)
    return b.select(b.compare(half, const(b, 0.0, x), "EQ"), x, value)


def log1p(b, x):
    """log(1 + x) (XLA's Log1p intrinsic): Cephes' x - x^2/2 + x^3 P(x)/Q(x) for
    |x| < sqrt(2) - 1, log(x + 1) beyond."""
    square = b.multiply(x, x)
    ratio = b.divide(horner(b, x, LOG1P_P), horner(b, x, LOG1P_Q))
    tail = b.add(b.multiply(const(b, -0.5, x), square), b.multiply(b.multiply(x, square), ratio))
    near_zero = b.add(x, tail)
    far = b.unary("log", b.add(x, const(b, 1.0, x)))
    return b.select(b.compare(abs_(b, x), const(b, LOG1P_SMALL, x), "LT"), near_zero, far)


def cosm1(b, x):
    """cos(x) - 1 (XLA's EmitCosm1): Cephes' -x^2/2 + x^4 C(x^2) for x^2 <= (pi/4)^2,
    cos(x) - 1 beyond."""
    square = b.multiply(x, x)
    near_zero = b.add(b.multiply(b.multiply(square, square), horner(b, square, COSM1_C)),
                      b.multiply(const(b, -0.5, x), square))
    far = b.add(b.unary("cosine", x), const(b, -1.0, x))
    return b.select(b.compare(square, const(b, COSM1_SMALL_SQUARE, x), "GT"), far, near_zero)


def is_nan(b, x):
    return b.compare(x, x, "NE")


def complex_expm1(b, z):
    """e^z - 1 for z = a + iy (XLA's complex kExpm1):
        (expm1(a) cos(y) + cosm1(y)) + i e^a sin(y),
    which keeps the digits of both small a and small y; the imaginary part is 0 where y is.
    As in XLA, e^a is expm1(a) + 1, which is 0 where e^a is below half an ulp of 1 (the
    imaginary part of expm1(-20 - 0.3i) is 0 in f32)."""
    a, y = parts(b, z)
    expm1_a = expm1(b, a)
    cosm1_y = cosm1(b, y)
    one = const(b, 1.0, a)
    real = b.add(b.multiply(expm1_a, b.add(cosm1_y, one)), cosm1_y)
    imag = b.multiply(b.add(expm1_a, one), b.unary("sine", y))
    zero = const(b, 0.0, a)
    return compose(b, real, b.select(b.compare(y, zero, "EQ"), zero, imag), z)


def complex_log1p(b, z):
    """log(1 + z) for z = a + iy (XLA's complex kLog1p): the imaginary part atan2(y, a + 1); the
    real part log|1 + z| = log(m) + log1p((n/m)^2)/2 with m, n the larger and smaller of
    |a + 1| and |y| (no overflow), where log(m) is log1p(a) when a + 1 > |y| (no cancellation
    for small a), else log1p(m - 1) (which cancels, as in XLA, for small |y| > |a + 1|); n
    where that is nan (infinite parts)."""
    a, y = parts(b, z)
    a_plus_one = b.add(a, const(b, 1.0, a))
    abs_a_plus_one, abs_y = abs_(b, a_plus_one), abs_(b, y)
    larger, smaller = b.maximum(abs_a_plus_one, abs_y), b.minimum(abs_a_plus_one, abs_y)
    larger_minus_one = b.select(b.compare(a_plus_one, abs_y, "GT"), a, b.subtract(larger, const(b, 1.0, a)))
    ratio = b.divide(smaller, larger)
    real = b.add(b.multiply(const(b, 0.5, a), log1p(b, b.multiply(ratio, ratio))), log1p(b, larger_minus_one))
    real = b.select(is_nan(b, real), smaller, real)
    return compose(b, real, b.binary("atan2", y, a_plus_one), z)


def tanh_parts(b, a, y):
    """The real and imaginary parts of tanh(a + iy) (XLA's complex kTanh):
        (e^2a - e^-2a + 2i sin 2y) / (e^2a + e^-2a + 2 cos 2y)
    with e^2a - e^-2a and e^2a + e^-2a - 2 from expm1 (no cancellation for small a) and
    2 cos 2y + 2 = 4 cos^2 y, 2 sin 2y = 4 sin y cos y (no cancellation where the denominator
    nears 0). Where e^2a + e^-2a overflows the real part is sign(a); nan where sin 2y is nan
    and a finite; the imaginary part is 0 where y is, or where a is infinite and sin 2y nan."""
    two_a = b.add(a, a)
    up, down = expm1(b, two_a), expm1(b, b.negate(two_a))
    cos_y, sin_y = b.unary("cosine", y), b.unary("sine", y)
    four = const(b, 4.0, a)
    imag_numerator = b.multiply(four, b.multiply(cos_y, sin_y))
    sum_minus_two = b.add(up, down)
    denominator = b.add(sum_minus_two, b.multiply(b.multiply(cos_y, cos_y), four))
    inf, zero, one = const(b, float("inf"), a), const(b, 0.0, a), const(b, 1.0, a)
    sign_a = b.select(b.compare(a, zero, "LT"), const(b, -1.0, a), one)
    real = b.select(b.compare(sum_minus_two, inf, "EQ"), sign_a, b.divide(b.subtract(up, down), denominator))
    imag = b.divide(imag_numerator, denominator)
    a_infinite = b.compare(abs_(b, a), inf, "EQ")
    sin_2y_nan = is_nan(b, imag_numerator)
    real = b.select(logical(b, "and", sin_2y_nan, b.unary("not", a_infinite)), const(b, float("nan"), a), real)
    imag_zero = logical(b, "or", b.compare(y, zero, "EQ"), logical(b, "and", a_infinite, sin_2y_nan))
    return real, b.select(imag_zero, zero, imag)


def complex_tanh(b, z):
    """tanh(z) (see tanh_parts)."""
    real, imag = tanh_parts(b, *parts(b, z))
    return compose(b, real, imag, z)


def complex_tan(b, z):
    """tan(x + iy) = -i tanh(-y + ix) (XLA's complex kTan)."""
    x, y = parts(b, z)
    real, imag = tanh_parts(b, b.negate(y), x)
    return compose(b, imag, b.negate(real), z)


def is_infinite(b, x):
    return b.compare(abs_(b, x), const(b, float("inf"), x), "EQ")


def sign_bit_set(b, x):
    """Whether `x` has its sign bit set (-0 and negative nans included), read off its bits."""
    integer = ir.RankedTensorType.get(shape(x), ir.IntegerType.get_signless(float_bits(element(x))))
    bits = b.op("bitcast_convert", [x], integer)
    return b.compare(bits, b.splat(0, bits), "LT", "SIGNED")


def copy_sign(b, magnitude, sign):
    """`magnitude` (not negative) with the sign of `sign`."""
    return b.select(sign_bit_set(b, sign), b.negate(magnitude), magnitude)


def two_sum(b, p, q):
    """p + q as s + e exactly (Knuth's 2Sum): s the rounded sum, e its rounding error."""
    s = b.add(p, q)
    p_part = b.subtract(s, q)
    q_part = b.subtract(s, p_part)
    return s, b.add(b.subtract(p, p_part), b.subtract(q, q_part))


def square_dekker(b, x):
    """x^2 as h + l exactly (Dekker's product, x split in halves by Veltkamp's 2^ceil(p/2) + 1):
    h the rounded square, l its rounding error. nan for x near max, where the split overflows
    (callers select another formula there)."""
    splitter = const(b, 2.0 ** ((float_info(x).nmant + 2) // 2) + 1, x)
    scaled = b.multiply(splitter, x)
    high = b.subtract(scaled, b.subtract(scaled, x))
    low = b.subtract(x, high)
    square = b.multiply(x, x)
    error = b.add(b.add(b.subtract(b.multiply(high, high), square), b.multiply(b.add(high, high), low)),
                  b.multiply(low, low))
    return square, error


def squares_minus_one(b, x, y):
    """x^2 + y^2 - 1 with the squares as Dekker's exact pairs, summed -1, larger square,
    smaller square, then their rounding errors by a cascade of 2Sum whose own errors are added
    last: near |z| = 1 the leading terms cancel exactly and every digit of the result stays."""
    xx, xx_error = square_dekker(b, x)
    yy, yy_error = square_dekker(b, y)
    x_larger = b.compare(xx, yy, "GT")
    total, cascade_errors = const(b, -1.0, x), []
    for term in (b.select(x_larger, xx, yy), b.select(x_larger, yy, xx),
                 b.select(x_larger, xx_error, yy_error), b.select(x_larger, yy_error, xx_error)):
        total, error = two_sum(b, total, term)
        cascade_errors.append(error)
    first, second, third, fourth = cascade_errors
    return b.add(total, b.add(b.add(first, second), b.add(third, fourth)))


def log_abs(b, x, y):
    """log|x + iy| (StableHLO's complex log, after functional_algorithms; XLA takes log of
    its |z|, which overflows past max/sqrt(2) and cancels near |z| = 1):
    log1p(s)/2 for s = x^2 + y^2 - 1 (squares_minus_one) where log1p takes its Cephes
    polynomial (sqrt(1/2) - 1 < s < sqrt(2) - 1: StableHLO's |s| < 1/2 would reach the part of
    XLA's log1p that is 100 ulp off in f64), else log(m) + log1p((n/m)^2)/2 with m, n the
    larger and smaller of |x| and |y|, which cancels at most threefold there (n/m = 1 where
    m = n, which covers 0 and inf); inf where a part is infinite, even the other nan."""
    ax, ay = abs_(b, x), abs_(b, y)
    larger, smaller = b.maximum(ax, ay), b.minimum(ax, ay)
    one, half = const(b, 1.0, x), const(b, 0.5, x)
    ratio = b.select(b.compare(larger, smaller, "EQ"), one, b.divide(smaller, larger))
    far = b.add(b.unary("log", larger), b.multiply(half, log1p(b, b.multiply(ratio, ratio))))
    near_one = squares_minus_one(b, x, y)
    near = b.multiply(half, log1p(b, near_one))
    in_polynomial_range = logical(b, "and", b.compare(near_one, const(b, LOG1P_NEAR_ONE_LOW, x), "GT"),
                                  b.compare(near_one, const(b, LOG1P_SMALL, x), "LT"))
    value = b.select(in_polynomial_range, near, far)
    return b.select(logical(b, "or", is_infinite(b, x), is_infinite(b, y)), const(b, float("inf"), x), value)


def complex_log(b, z):
    """log(x + iy) = log|z| + i atan2(y, x) (see log_abs)."""
    x, y = parts(b, z)
    return compose(b, log_abs(b, x, y), b.binary("atan2", y, x), z)


def sqrt_scale(b, ax, ay):
    """A power of 4, c, and 1/sqrt(c), so that c|z| for |z| = hypot(ax, ay) keeps
    |cx| + c|z| finite (c = 1/4 above max/4) and (|cx| + c|z|)/2 normal (c = 2^k for
    max(ax, ay) below 2^k times the smallest normal, k even and past the mantissa)."""
    info = float_info(ax)
    k = info.nmant + 3 + (info.nmant + 3) % 2
    larger = b.maximum(ax, ay)
    large = b.compare(larger, const(b, float(info.max) / 4, ax), "GT")
    small = b.compare(larger, const(b, float(info.tiny) * 2.0 ** k, ax), "LT")

    def by_size(if_large, if_small):
        return b.select(large, const(b, if_large, ax), b.select(small, const(b, if_small, ax), const(b, 1.0, ax)))

    return by_size(0.25, 2.0 ** k), by_size(2.0, 2.0 ** (-k // 2))


def sqrt_larger_part(b, ax, ay):
    """u = sqrt((|x| + |z|)/2), the larger part of sqrt(x + iy) in magnitude (Kahan's csqrt, as
    StableHLO's complex sqrt after functional_algorithms), computed on z scaled by c of
    sqrt_scale (no overflow, no digits lost to subnormals) and scaled back exactly. Returns u,
    c|z| and c."""
    scale, root_of_inverse_scale = sqrt_scale(b, ax, ay)
    scaled_ax = b.multiply(ax, scale)
    scaled_abs = hypot(b, scaled_ax, b.multiply(ay, scale))
    root = b.unary("sqrt", b.multiply(b.add(scaled_ax, scaled_abs), const(b, 0.5, ax)))
    return b.multiply(root, root_of_inverse_scale), scaled_abs, scale


def arrange_parts(b, x, y, larger, smaller):
    """sqrt's parts from their magnitudes: (larger, sign(y) smaller) for x >= 0,
    (smaller, sign(y) larger) for x < 0 (sign(-0) = -1)."""
    x_negative = b.compare(x, const(b, 0.0, x), "LT")
    return b.select(x_negative, smaller, larger), copy_sign(b, b.select(x_negative, larger, smaller), y)


def complex_sqrt(b, z):
    """sqrt(x + iy) (StableHLO's complex sqrt after functional_algorithms; Kahan's csqrt): u of
    sqrt_larger_part and v = |y| / 2u, neither of which cancels, arranged by arrange_parts.
    XLA's polar form sqrt|z| (cos(t/2) + i sin(t/2)) leaves the small part the rounding error
    of cos(pi/2) (sqrt(-1.5 - 9.5e-20i) had a real part of -5e-8). C99's special values: u inf
    where a part is; v inf where y is, 0 where z is 0 (sqrt(+-0 +- 0i) = +0 +- 0i), nan where y
    is and x infinite (sqrt(inf + nan i) = inf + nan i, sqrt(-inf + nan i) = nan +- inf i)."""
    x, y = parts(b, z)
    ax, ay = abs_(b, x), abs_(b, y)
    u, _, _ = sqrt_larger_part(b, ax, ay)
    inf, zero = const(b, float("inf"), x), const(b, 0.0, x)
    y_infinite = is_infinite(b, y)
    u = b.select(logical(b, "or", is_infinite(b, x), y_infinite), inf, u)
    v = b.select(b.compare(u, zero, "EQ"), zero, b.divide(ay, b.add(u, u)))
    real, imag = arrange_parts(b, x, y, u, b.select(y_infinite, inf, v))
    return compose(b, real, imag, z)


def complex_rsqrt(b, z):
    """1/sqrt(z) = conj(sqrt(z)) / |z| (XLA's polar form loses the small part as its sqrt does):
    u/|z| and v/|z| = |y| / (2u|z|) for u of sqrt_larger_part and v = |y| / 2u, arranged as
    sqrt's parts and conjugated. |z| enters as c|z| / c (no overflow), and |y| / 2u|z| as
    ((2^p c|y|) / c|z|) / 2u scaled back by 2^-p where c|y| < 1 (2^p the mantissa's range), so
    no quotient on the way is subnormal where the result is not. inf + nan i at 0 and
    +0 -+ 0i where z is infinite (XLA gives the real zero the sign of x)."""
    x, y = parts(b, z)
    ax, ay = abs_(b, x), abs_(b, y)
    u, scaled_abs, scale = sqrt_larger_part(b, ax, ay)
    larger = b.divide(b.multiply(u, scale), scaled_abs)
    scaled_ay = b.multiply(ay, scale)
    lift = 2.0 ** (float_info(x).nmant + 1)
    lifted = b.compare(scaled_ay, const(b, 1.0, x), "LT")

    def if_lifted(factor):
        return b.select(lifted, const(b, factor, x), const(b, 1.0, x))

    lifted_y_over_abs = b.divide(b.multiply(scaled_ay, if_lifted(lift)), scaled_abs)
    smaller = b.multiply(b.divide(lifted_y_over_abs, b.add(u, u)), if_lifted(1.0 / lift))
    real, sqrt_imag = arrange_parts(b, x, y, larger, smaller)
    zero = const(b, 0.0, x)
    at_zero = logical(b, "and", b.compare(x, zero, "EQ"), b.compare(y, zero, "EQ"))
    infinite = logical(b, "or", is_infinite(b, x), is_infinite(b, y))
    real = b.select(at_zero, const(b, float("inf"), x), b.select(infinite, zero, real))
    imag = b.select(at_zero, const(b, float("nan"), x), b.negate(b.select(infinite, copy_sign(b, zero, y), sqrt_imag)))
    return compose(b, real, imag, z)


def real_in_f32(algorithm):
    def rewrite(b, x):
        return in_f32(b, algorithm, x)

    return rewrite


REAL_REWRITES = {"xhlo.exponential_minus_one": real_in_f32(expm1), "xhlo.log_plus_one": real_in_f32(log1p)}
COMPLEX_REWRITES = {
    "xhlo.exponential_minus_one": complex_expm1,
    "xhlo.log": complex_log,
    "xhlo.log_plus_one": complex_log1p,
    "xhlo.rsqrt": complex_rsqrt,
    "xhlo.sqrt": complex_sqrt,
    "xhlo.tan": complex_tan,
    "xhlo.tanh": complex_tanh,
}


def saturating_float_to_integer(b, x, result_type: ir.Type):
    """`convert(x)` to the integer `result_type` with XLA's saturation, decided in f32 (or
    f64) where the range's bounds, powers of two, are exact: NaN is 0, x at or beyond 2^(bits
    - 1) (2^bits unsigned) the largest integer, x below the smallest (below 0 unsigned) the
    smallest; in between the plain conversion, which truncates toward zero."""
    if is_narrow_float(element(x)):
        x = b.convert(x, ir.F32Type.get())
    integer = ir.IntegerType(ir.RankedTensorType(result_type).element_type)
    bits, unsigned = integer.width, integer.is_unsigned
    smallest, largest = (0, 2**bits - 1) if unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    converted = b.op("convert", [x], result_type)

    def splat(value: int) -> ir.Value:  # as the integer's bits: an attribute holds at most a signed 64-bit value
        return b.splat(value - 2**bits if value >= 2 ** (bits - 1) else value, converted)

    saturated = b.select(b.compare(x, const(b, float(largest + 1), x), "GE"), splat(largest), converted)
    saturated = b.select(b.compare(x, const(b, float(smallest), x), "LT"), splat(smallest), saturated)
    return b.select(b.compare(x, x, "NE"), splat(0), saturated)


def converts_float_to_integer(op: ir.Operation) -> bool:
    source, target = element(op.operands[0]), element(op.results[0])
    return (isinstance(source, (ir.F32Type, ir.F64Type)) or is_narrow_float(source)) and isinstance(target, ir.IntegerType) \
        and ir.IntegerType(target).width > 1


def rewrite_of(op: ir.Operation):
    """The rewrite for `op`, or None when the lowering computes it well."""
    if op.name == "xhlo.convert":
        return (lambda b, x: saturating_float_to_integer(b, x, op.results[0].type)) if converts_float_to_integer(op) else None
    if op.name not in COMPLEX_REWRITES:
        return None
    kind = element(op.results[0])
    if is_complex(kind):
        return COMPLEX_REWRITES[op.name]
    if isinstance(kind, (ir.F32Type, ir.F64Type)) or is_narrow_float(kind):
        return REAL_REWRITES.get(op.name)
    return None


def rewrite_elemental_math(module: ir.Module) -> None:
    """Replace every op of `module` the lowering computes inaccurately by XLA's algorithm."""
    for op in ops_in_dialect(module, "xhlo"):
        rewrite = rewrite_of(op)
        if rewrite is None:
            continue
        with ir.InsertionPoint(op), op.location:
            value = rewrite(XhloBuilder(op.location), op.operands[0])
        op.results[0].replace_all_uses_with(value)
        erase(op)
