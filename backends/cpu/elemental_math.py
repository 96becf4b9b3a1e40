"""Elementwise math that the upstream lowering computes inaccurately, rewritten in xhlo the way
XLA's elemental IR emitter (xla/service/elemental_ir_emitter.cc) computes it, before a kernel
is lowered to StableHLO:

- real expm1 and log1p: MLIR's convert-math-to-llvm makes `math.expm1` exp(x) - 1 and
  `math.log1p` log(1 + x), which lose every digit near 0 (JAX's testLog1pNearOne found
  log1p(1e-5) 14932 ulp off; chlo.acosh, asinh and atanh, built on log1p, lost with it);
- complex expm1, log1p, tan and tanh: convert-complex-to-standard's formulas cancel when a part
  is small (expm1(1e-8 + 1e-8j) had a real part of -1e-16) and overflow when one is large.

f16 and bf16 are computed in f32 and rounded back. The rewritten ops call each other's
algorithms directly (complex log1p uses the real log1p here, not `math.log1p`).
"""

from mlirxla.dialects.xhlo.builder import XhloBuilder
from mlirxla.frontdoor.chlo_rules import (abs_, compose, const, element, horner, in_f32, is_complex, is_narrow_float,
                                          logical, parts)
from mlirxla.frontdoor.stablehlo_to_xhlo import collect
from mlirxla.mlir import ir
from mlirxla.transforms.erasure import erase

# Cephes log1p: log1p(x) = x - x^2/2 + x^3 P(x)/Q(x) for |x| < sqrt(2) - 1 (XLA's Log1p intrinsic).
LOG1P_SMALL = 0.41421356237309504880
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


def real_in_f32(algorithm):
    def rewrite(b, x):
        return in_f32(b, algorithm, x)

    return rewrite


REAL_REWRITES = {"xhlo.exponential_minus_one": real_in_f32(expm1), "xhlo.log_plus_one": real_in_f32(log1p)}
COMPLEX_REWRITES = {
    "xhlo.exponential_minus_one": complex_expm1,
    "xhlo.log_plus_one": complex_log1p,
    "xhlo.tan": complex_tan,
    "xhlo.tanh": complex_tanh,
}


def rewrite_of(op: ir.Operation):
    """The rewrite for `op`, or None when the lowering computes it well."""
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
    for op in collect(module, "xhlo."):
        rewrite = rewrite_of(op)
        if rewrite is None:
            continue
        with ir.InsertionPoint(op), op.location:
            value = rewrite(XhloBuilder(op.location), op.operands[0])
        op.results[0].replace_all_uses_with(value)
        erase(op)
