"""f32 `math.exp`, `math.tanh`, `math.log` and `math.powf`, and f64 `math.exp` and `math.tanh`,
as arithmetic, so that the LLVM loop vectorizer widens them with everything around them (a
call to libm's exp/tanh/log in a loop stays scalar: this LLVM does not map them to a vector
math library, and `vector_math.py` leaves f64 scalar). bf16 and f16 math is computed in f32 by
then, so it is rewritten too.

- exp: Cephes' range reduction x = n ln2 + r (ln2 split in two constants, each step one
  multiply-add), its degree-6 polynomial for e^r extended by Horner's rule to the whole
  1 + r + r^2 (...), and y 2^n scaled in one rounding: `llvm.ldexp` where the host has
  AVX-512 (one vscalefps), else two factors built in the exponent bits (2^(n>>1) 2^(n - n>>1),
  both normal). About 1 ulp, denormal results within 1 ulp. x is first clamped to
  [-110, 100], past both ends of the f32 range, so the scaling itself overflows to inf; NaN
  stays NaN through the clamp. Results under 2^-126 come out of the same scaling: 0 where
  the kernel flushes denormals (the default, `denormal_flushing.py`), as XLA:CPU's exp gives
  them (`jnp.exp(-95.0)` is 0 on jax's cpu backend), and the denormal, within 1 ulp, with
  gradual underflow. Flushing also spares x86 the microcode assist a denormal result takes
  (a causal attention mask's exp of -1e30 ran 20x slower than exp(-1) before, when such
  results were built from their bits instead); with gradual underflow they take it.
- tanh: Eigen's (and XLA's) rational approximation on x clamped to [-7.9053, 7.9053], +-1
  beyond it; x itself below 0.0004 in magnitude. A few ulp.
- log: Cephes' logf: x = m 2^e with m in [sqrt(1/2), sqrt(2)) taken from the bits (a
  denormal x scaled by 2^23 first), log(1 + f) for f = m - 1 by a degree-9 polynomial, e ln 2
  added in two parts. About 1 ulp; 0 gives -inf, +inf stays inf, negatives and NaN give the
  NaN of all ones bits, as XLA's logarithm does (jax's cpu backend gives 0xFFFFFFFF, and 0xFFC0
  in bf16).
- pow: e^(y log|x|) computed in f64 (log by the atanh series on the mantissa, exp by a
  Taylor polynomial after Cody-Waite reduction, both about 1e-16, so y log|x| keeps the
  digits an f32 result needs even near overflow) and rounded once to f32; C's special cases
  (x^0 = 1, 1^y = 1, signs of negative x to odd integer powers, NaN for non-integer powers
  of negative x) by selects. Within an ulp, denormal results included.

- f64 exp: XLA:CPU's (Cephes' exp, which Eigen's pexp follows): x = n ln2 + r with ln2 in two
  parts, e^r = 1 + 2 r P(r^2) / (Q(r^2) - r P(r^2)), times 2^n in two normal factors; 0 below
  -708.396 (where e^x leaves the normal range) and inf above 709.78, as XLA's exp gives them.
  About 1 ulp. libm's exp, one scalar call per element, ran 5x slower than XLA:CPU's.
- f64 tanh: Cephes' tanh: x + x^3 P(x^2)/Q(x^2) below 0.625 in magnitude, else
  (e - 1) / (e + 1) for e = e^(2|x|) from the exp's parts, its sign x's; one division for
  either. About 1 ulp; libm's ran 16x slower than XLA:CPU's tanh (and `jax.nn.sigmoid`,
  which computes exp, 3x).

Polynomials are evaluated by Horner's rule in multiply-adds LLVM may fuse (`contract`), and
clamps are compare-and-selects that keep NaN, so that on x86 each is one min or max
instruction. Other types and functions keep the libm call.
"""

import functools
import math

import llvmlite.binding as llvm

from mlirxla.mlir import ir

EXP_POLYNOMIAL = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)
# x is clamped to these, past the ends of the f32 range (ln of the largest f32 is 88.72,
# 2^-150 is e^-103.97): y 2^n at the clamps is inf and 0, and 2^(n/2) stays normal
EXP_CLAMP_HIGH = 100.0
EXP_CLAMP_LOW = -110.0
LOG2E = 1.44269504088896341
LN2_HIGH = 0.693359375
LN2_LOW = -2.12194440e-4
TANH_BOUND = 7.90531110763549805
TANH_TINY = 0.0004
TANH_NUMERATOR = (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
                  1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03)
TANH_DENOMINATOR = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03)
LOG_POLYNOMIAL = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
                  2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)
SQRT_HALF = 0.707106781186547524
SMALLEST_NORMAL = 1.17549435e-38
DENORMAL_SCALE = 8388608.0  # 2^23: a denormal times it is normal
MANTISSA_AND_SIGN = -2139095041  # 0x807FFFFF as i32: the bits that are not the exponent
HALF_EXPONENT = 0x3F000000  # the exponent bits of 0.5
ORDERED_EQUAL, ORDERED_GREATER, ORDERED_LESS, ORDERED_NOT_EQUAL, UNORDERED_OR_LESS = 1, 2, 4, 6, 11  # arith.cmpf predicates
# pow in f64: log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716: 2 s (1 + s^2/3 + ... + s^20/21)
WIDE_LOG_SERIES = tuple(1.0 / (2 * k + 1) for k in range(10, -1, -1))
WIDE_EXP_TAYLOR = tuple(1.0 / math.factorial(k) for k in range(12, -1, -1))  # |r| <= ln2 / 2: r^13/13! < 2e-16
WIDE_LN2_HIGH = 6.93147180369123816490e-01  # ln 2 in two parts (fdlibm's), n ln2_high exact for |n| < 2^20
WIDE_LN2_LOW = 1.90821492927058770002e-10
WIDE_EXP_BOUND = 200.0  # e^200 overflows f32 and e^-200 rounds to 0 in it, while 2^n stays a normal f64
WIDE_MANTISSA_AND_SIGN = -9218868437227405313  # 0x800FFFFFFFFFFFFF as i64: the bits that are not the exponent
WIDE_HALF_EXPONENT = 0x3FE0000000000000  # the exponent bits of 0.5 in f64
# Cephes' exp (XLA:CPU's f64 exp): e^r = 1 + 2 r P(r^2) / (Q(r^2) - r P(r^2)), |r| <= ln2 / 2
EXP64_NUMERATOR = (1.26177193074810590878e-4, 3.02994407707441961300e-2, 9.99999999999999999910e-1)
EXP64_DENOMINATOR = (3.00198505138664455042e-6, 2.52448340349684104192e-3, 2.27265548208155028766e-1, 2.00000000000000000009e0)
EXP64_LN2_HIGH = 0.693145751953125  # exact in few bits: n times it is exact
EXP64_LN2_LOW = 1.42860682030941723212e-6
EXP64_HIGH = 709.782712893384  # e^x overflows past it
EXP64_LOW = -708.3964185322641  # e^x is below the smallest normal f64 past it
# Cephes' tanh: x + x^3 P(x^2) / Q(x^2) for |x| < 0.625 (Q monic)
TANH64_SMALL = 0.625
TANH64_NUMERATOR = (-9.64399179425052238628e-1, -9.92877231001918586564e1, -1.61468768441708447952e3)
TANH64_DENOMINATOR = (1.0, 1.12811678491632931402e2, 2.23548839060100448583e3, 4.84406305325125486048e3)
TANH64_SATURATION = 40.0  # tanh(20) rounds to 1 in f64 (1 - tanh(20) ~ 8e-18)


class Builder:
    """Scalar-or-vector f32 (or f64) arithmetic at the insertion point, shaped like `like`;
    `integer_type` is the integer of the float's width, for its bits."""

    def __init__(self, like: ir.Type):
        self.type = like
        self.vector = isinstance(like, ir.VectorType)
        self.shape = list(ir.VectorType(like).shape) if self.vector else None
        self.element = ir.VectorType(like).element_type if self.vector else like
        self.width = 64 if isinstance(self.element, ir.F64Type) else 32
        self.integer_type = self.shaped(ir.IntegerType.get_signless(self.width))
        self.i1 = self.shaped(ir.IntegerType.get_signless(1))

    def shaped(self, element: ir.Type) -> ir.Type:
        return ir.VectorType.get(self.shape, element) if self.vector else element

    def wide(self) -> "Builder":
        """A builder for f64 values of this shape."""
        return Builder(self.shaped(ir.F64Type.get()))

    def op(self, name: str, operands: list, result=None, attributes=None) -> ir.Value:
        return ir.Operation.create(name, results=[result or self.type], operands=operands, attributes=attributes or {}).result

    def constant(self, value: float) -> ir.Value:
        scalar = ir.FloatAttr.get(self.element, value)
        attr = ir.DenseElementsAttr.get_splat(self.type, scalar) if self.vector else scalar
        return self.op("arith.constant", [], attributes={"value": attr})

    def integer(self, value: int) -> ir.Value:
        scalar = ir.IntegerAttr.get(ir.IntegerType.get_signless(self.width), value)
        attr = ir.DenseElementsAttr.get_splat(self.integer_type, scalar) if self.vector else scalar
        return self.op("arith.constant", [], self.integer_type, {"value": attr})

    def add(self, a, b):
        return self.op("arith.addf", [a, b])

    def mul(self, a, b):
        return self.op("arith.mulf", [a, b])

    def fma(self, a, b, c):
        """a b + c, which LLVM may contract into one fused multiply-add where the host has one
        (a step of Horner's rule in half the instructions, and rounded once)."""
        contract = {"fastmath": ir.Attribute.parse("#arith.fastmath<contract>")}
        product = self.op("arith.mulf", [a, b], attributes=contract)
        return self.op("arith.addf", [product, c], attributes=contract)

    def polynomial(self, x, coefficients) -> ir.Value:
        """Horner's rule, highest power first."""
        result = self.constant(coefficients[0])
        for coefficient in coefficients[1:]:
            result = self.fma(result, x, self.constant(coefficient))
        return result

    def power_of_two(self, exponent):
        """2^exponent for an integer exponent in the normal range, built in the exponent bits."""
        bias, mantissa_bits = (1023, 52) if self.width == 64 else (127, 23)
        biased = self.op("arith.addi", [exponent, self.integer(bias)], self.integer_type)
        return self.op("arith.bitcast", [self.op("arith.shli", [biased, self.integer(mantissa_bits)], self.integer_type)])

    def less(self, x, y):
        """x < y, ordered (false for NaN); a float stands for a constant."""
        ordered_less_than = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 4)
        x, y = (self.constant(v) if isinstance(v, float) else v for v in (x, y))
        return self.op("arith.cmpf", [x, y], self.i1, {"predicate": ordered_less_than})

    def compare(self, predicate: int, x, y):
        x, y = (self.constant(v) if isinstance(v, float) else v for v in (x, y))
        return self.op("arith.cmpf", [x, y], self.i1, {"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), predicate)})

    def select(self, condition, if_true, if_false):
        if_true, if_false = (self.constant(v) if isinstance(v, float) else v for v in (if_true, if_false))
        return self.op("arith.select", [condition, if_true, if_false])

    def integer_op(self, name: str, a, b):
        return self.op(name, [a, b], self.integer_type)

    def clamp(self, x, low: float, high: float):
        """x limited to [low, high], NaN kept; as compare-and-selects, which x86 runs as one
        max and one min instruction each (`arith.maximumf` becomes several: it orders signed
        zeros and propagates NaN from either side)."""
        low_value, high_value = self.constant(low), self.constant(high)
        raised = self.select(self.compare(ORDERED_GREATER, low_value, x), low_value, x)
        return self.select(self.compare(ORDERED_LESS, high_value, raised), high_value, raised)


@functools.cache
def scales_in_one_instruction() -> bool:
    """Whether the host scales a vector of floats by powers of two in one instruction
    (AVX-512's vscalefps, which LLVM makes of a vectorized `llvm.ldexp`, rounding once, as the
    two factors do). Elsewhere ldexp is a call to libm per element, so exp builds 2^n in the
    exponent bits instead, as it does on vectors (the row engine's): the toolkit's
    `llvm.intr.ldexp` takes a scalar exponent only."""
    return "+avx512f" in llvm.get_host_cpu_features().flatten().split(",")


def exp(b: Builder, x_input: ir.Value) -> ir.Value:
    x = b.clamp(x_input, EXP_CLAMP_LOW, EXP_CLAMP_HIGH)
    n = b.op("math.floor", [b.fma(x, b.constant(LOG2E), b.constant(0.5))])
    r = b.fma(n, b.constant(-LN2_LOW), b.fma(n, b.constant(-LN2_HIGH), x))
    y = b.polynomial(r, EXP_POLYNOMIAL + (1.0, 1.0))
    return scaled_by_power_of_two(b, y, b.op("arith.fptosi", [n], b.integer_type))


def scaled_by_power_of_two(b: Builder, y: ir.Value, exponent: ir.Value) -> ir.Value:
    """y 2^exponent rounded once, for y near 1 and exponent within [-160, 145] (each of the
    two factors stays normal; their product may be denormal, or 0 where the kernel flushes)."""
    if scales_in_one_instruction() and not isinstance(y.type, ir.VectorType):
        return b.op("llvm.intr.ldexp", [y, exponent])
    half = b.op("arith.shrsi", [exponent, b.integer(1)], b.integer_type)
    rest = b.op("arith.subi", [exponent, half], b.integer_type)
    return b.mul(b.mul(y, b.power_of_two(half)), b.power_of_two(rest))


def exp64_parts(b: Builder, t: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(n, p, q) with e^t = 2^n (q + p) / (q - p): n an integer (0 for a NaN t, whose p and q
    are NaN: no poison from converting NaN), t within the f64 range."""
    n = b.op("math.floor", [b.fma(t, b.constant(LOG2E), b.constant(0.5))])
    r = b.fma(n, b.constant(-EXP64_LN2_LOW), b.fma(n, b.constant(-EXP64_LN2_HIGH), t))
    square = b.mul(r, r)
    p = b.mul(b.polynomial(square, EXP64_NUMERATOR), r)
    q = b.polynomial(square, EXP64_DENOMINATOR)
    whole = b.op("arith.fptosi", [b.select(b.compare(ORDERED_EQUAL, n, n), n, 0.0)], b.integer_type)
    return whole, p, q


def exp64(b: Builder, x: ir.Value) -> ir.Value:
    whole, p, q = exp64_parts(b, b.clamp(x, EXP64_LOW, EXP64_HIGH))
    y = b.fma(b.op("arith.divf", [p, b.op("arith.subf", [q, p])]), b.constant(2.0), b.constant(1.0))
    half = b.op("arith.shrsi", [whole, b.integer(1)], b.integer_type)
    rest = b.op("arith.subi", [whole, half], b.integer_type)
    result = b.mul(b.mul(y, b.power_of_two(half)), b.power_of_two(rest))
    result = b.select(b.less(x, EXP64_LOW), 0.0, result)
    return b.select(b.compare(ORDERED_GREATER, x, EXP64_HIGH), float("inf"), result)


def tanh64(b: Builder, x: ir.Value) -> ir.Value:
    """tanh of |x|, given x's sign (tanh is odd: -0 stays -0, NaN stays NaN), in one division:
    (m Q + m^3 P) / Q below TANH64_SMALL, else (e - 1) / (e + 1) with e = e^(2m) =
    2^n (q + p) / (q - p), so (2^n (q + p) - (q - p)) / (2^n (q + p) + (q - p)); 2m is
    clamped to TANH64_SATURATION, where the ratio is 1 and 2^n stays normal."""
    magnitude = b.op("math.absf", [x])
    square = b.mul(magnitude, magnitude)
    denominator_small = b.polynomial(square, TANH64_DENOMINATOR)
    numerator_small = b.fma(b.mul(magnitude, square), b.polynomial(square, TANH64_NUMERATOR), b.mul(magnitude, denominator_small))
    whole, p, q = exp64_parts(b, b.clamp(b.add(magnitude, magnitude), 0.0, TANH64_SATURATION))
    grown, shrunk = b.mul(b.add(q, p), b.power_of_two(whole)), b.op("arith.subf", [q, p])
    small = b.less(magnitude, TANH64_SMALL)
    numerator = b.select(small, numerator_small, b.op("arith.subf", [grown, shrunk]))
    denominator = b.select(small, denominator_small, b.add(grown, shrunk))
    return b.op("math.copysign", [b.op("arith.divf", [numerator, denominator]), x])


def tanh(b: Builder, x: ir.Value) -> ir.Value:
    clamped = b.clamp(x, -TANH_BOUND, TANH_BOUND)
    square = b.mul(clamped, clamped)
    numerator = b.mul(b.polynomial(square, TANH_NUMERATOR), clamped)
    denominator = b.polynomial(square, TANH_DENOMINATOR)
    ratio = b.op("arith.divf", [numerator, denominator])
    # beyond the bound tanh is +-1 in f32; the fused multiply-adds leave the ratio 2 ulp short
    magnitude = b.op("math.absf", [x])
    ratio = b.select(b.compare(ORDERED_GREATER, magnitude, TANH_BOUND), b.op("math.copysign", [b.constant(1.0), x]), ratio)
    return b.op("arith.select", [b.less(magnitude, TANH_TINY), x, ratio])


def log(b: Builder, x: ir.Value) -> ir.Value:
    denormal = b.less(x, SMALLEST_NORMAL)
    scaled = b.select(denormal, b.mul(x, b.constant(DENORMAL_SCALE)), x)
    bits = b.op("arith.bitcast", [scaled], b.integer_type)
    exponent = b.integer_op("arith.subi", b.integer_op("arith.shrui", bits, b.integer(23)), b.integer(126))
    exponent = b.integer_op("arith.subi", exponent, b.op("arith.select", [denormal, b.integer(23), b.integer(0)], b.integer_type))
    fraction_bits = b.integer_op("arith.ori", b.integer_op("arith.andi", bits, b.integer(MANTISSA_AND_SIGN)), b.integer(HALF_EXPONENT))
    mantissa = b.op("arith.bitcast", [fraction_bits])  # in [0.5, 1)
    e = b.op("arith.sitofp", [exponent])
    # m below sqrt(1/2) is doubled (and e lowered) so that f = m - 1 lies in [-0.29, 0.41]
    low = b.less(mantissa, SQRT_HALF)
    e = b.select(low, b.add(e, b.constant(-1.0)), e)
    f = b.add(b.select(low, b.add(mantissa, mantissa), mantissa), b.constant(-1.0))
    square = b.mul(f, f)
    y = b.mul(b.mul(b.polynomial(f, LOG_POLYNOMIAL), f), square)
    y = b.fma(e, b.constant(LN2_LOW), y)
    y = b.fma(square, b.constant(-0.5), y)
    result = b.fma(e, b.constant(LN2_HIGH), b.add(f, y))
    result = b.select(b.compare(ORDERED_EQUAL, x, 0.0), float("-inf"), result)
    result = b.select(b.compare(ORDERED_EQUAL, x, float("inf")), float("inf"), result)
    all_ones_nan = b.op("arith.bitcast", [b.integer(-1)])
    return b.select(b.compare(UNORDERED_OR_LESS, x, 0.0), all_ones_nan, result)


def wide_log(w: Builder, x: ir.Value) -> ir.Value:
    """log of a non-negative f64 x (an f32 magnitude: never denormal in f64), about 1e-16."""
    bits = w.op("arith.bitcast", [x], w.integer_type)
    exponent = w.integer_op("arith.subi", w.integer_op("arith.shrui", bits, w.integer(52)), w.integer(1022))
    fraction_bits = w.integer_op("arith.ori", w.integer_op("arith.andi", bits, w.integer(WIDE_MANTISSA_AND_SIGN)),
                                 w.integer(WIDE_HALF_EXPONENT))
    mantissa = w.op("arith.bitcast", [fraction_bits])  # in [0.5, 1)
    e = w.op("arith.sitofp", [exponent])
    low = w.less(mantissa, SQRT_HALF)
    e = w.select(low, w.add(e, w.constant(-1.0)), e)
    m = w.select(low, w.add(mantissa, mantissa), mantissa)
    ratio = w.op("arith.divf", [w.add(m, w.constant(-1.0)), w.add(m, w.constant(1.0))])
    log_m = w.mul(w.mul(ratio, w.constant(2.0)), w.polynomial(w.mul(ratio, ratio), WIDE_LOG_SERIES))
    result = w.fma(e, w.constant(WIDE_LN2_HIGH), w.fma(e, w.constant(WIDE_LN2_LOW), log_m))
    result = w.select(w.compare(ORDERED_EQUAL, x, 0.0), float("-inf"), result)
    result = w.select(w.compare(ORDERED_EQUAL, x, float("inf")), float("inf"), result)
    return w.select(w.compare(UNORDERED_OR_LESS, x, 0.0), float("nan"), result)


def wide_exp(w: Builder, t: ir.Value) -> ir.Value:
    """e^t in f64, about 1e-16, t clamped to +-WIDE_EXP_BOUND (beyond it the f32 result is 0 or inf)."""
    t = w.clamp(t, -WIDE_EXP_BOUND, WIDE_EXP_BOUND)
    n = w.op("math.floor", [w.fma(t, w.constant(LOG2E), w.constant(0.5))])
    r = w.add(w.add(t, w.mul(n, w.constant(-WIDE_LN2_HIGH))), w.mul(n, w.constant(-WIDE_LN2_LOW)))
    return w.mul(w.polynomial(r, WIDE_EXP_TAYLOR), w.power_of_two(w.op("arith.fptosi", [n], w.integer_type)))


def power(b: Builder, x: ir.Value, y: ir.Value) -> ir.Value:
    """f32 x^y as e^(y log|x|) in f64, rounded once to f32 (so within an ulp, denormal results
    included), with C's special cases: x^0 = 1^y = 1 (NaN too), (-1)^+-inf = 1, a negative x
    to an odd integer power negative (-0 too), to a non-integer power NaN."""
    w = b.wide()
    xd, yd = (w.op("arith.extf", [value]) for value in (x, y))
    magnitude_x = w.op("math.absf", [xd])
    magnitude = wide_exp(w, w.mul(yd, wide_log(w, magnitude_x)))
    floor_y, half_y = w.op("math.floor", [yd]), w.mul(yd, w.constant(0.5))
    integer_y = w.compare(ORDERED_EQUAL, floor_y, yd)  # infinities count as even integers, as in C
    odd_y = w.op("arith.andi", [integer_y, w.compare(ORDERED_NOT_EQUAL, w.op("math.floor", [half_y]), half_y)], w.i1)
    sign_bit = w.op("arith.cmpi", [w.op("arith.bitcast", [xd], w.integer_type), w.integer(0)], w.i1,
                    {"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 2)})  # slt: the sign bit set
    result = w.select(w.op("arith.andi", [sign_bit, odd_y], w.i1), w.op("arith.negf", [magnitude]), magnitude)
    negative_finite = w.op("arith.andi", [w.less(xd, 0.0), w.less(float("-inf"), xd)], w.i1)
    not_integer = w.compare(ORDERED_NOT_EQUAL, floor_y, yd)
    result = w.select(w.op("arith.andi", [negative_finite, not_integer], w.i1), float("nan"), result)
    one = w.op("arith.ori", [w.compare(ORDERED_EQUAL, yd, 0.0), w.compare(ORDERED_EQUAL, xd, 1.0)], w.i1)
    unit_to_infinity = w.op("arith.andi", [w.compare(ORDERED_EQUAL, magnitude_x, 1.0),
                                           w.compare(ORDERED_EQUAL, w.op("math.absf", [yd]), float("inf"))], w.i1)
    result = w.select(w.op("arith.ori", [one, unit_to_infinity], w.i1), 1.0, result)
    return b.op("arith.truncf", [result])


APPROXIMATIONS = {
    ir.F32Type: {"math.exp": exp, "math.tanh": tanh, "math.log": log, "math.powf": power},
    ir.F64Type: {"math.exp": exp64, "math.tanh": tanh64},
}


def approximation_of(op: ir.Operation):
    """The approximation that replaces `op`, None when it keeps its libm call."""
    value_type = op.results[0].type if len(op.results) == 1 else None
    element = ir.VectorType(value_type).element_type if isinstance(value_type, ir.VectorType) else value_type
    for float_type, functions in APPROXIMATIONS.items():
        if isinstance(element, float_type):
            return functions.get(op.name)
    return None


def approximate(module: ir.Module) -> None:
    """Replace every f32 exp, tanh, log and pow and f64 exp and tanh in `module` by its
    arithmetic approximation."""
    found = []

    def visit(op):
        if op.operation.name.startswith("math.") and approximation_of(op.operation) is not None:
            found.append(op.operation)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for op in found:
        with ir.InsertionPoint(op), op.location:
            value = approximation_of(op)(Builder(op.results[0].type), *op.operands)
        op.results[0].replace_all_uses_with(value)
        op.erase()
