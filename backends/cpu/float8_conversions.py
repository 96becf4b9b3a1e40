"""Conversions between f32 and the OCP 8-bit floats (f8E4M3FN, f8E5M2) as integer arithmetic.

LLVM has no 8-bit float type: a kernel reading or writing one failed to lower (`arith.extf`
of an f8E4M3FN value left an unrealized cast) and ran on the reference interpreter, 0.75 s
for 64K conversions, 27 s for a 256 x 256 f8 matmul. Arithmetic on such values is emulated
in f32 (`arith-emulate-unsupported-floats`, as bf16's), so what is left are the conversions,
expanded here into integer ops the vectorizer widens, with the bits XLA:CPU and ml_dtypes
give (checked over every 8-bit pattern and the rounding boundaries):

- to f32: sign, exponent rebiased and mantissa shifted; a subnormal is its mantissa times
  2^(1 - bias - mantissa bits); NaN is the quiet NaN with the sign (E4M3FN has no infinity,
  its NaN is S.1111.111; E5M2's all-ones exponent is an infinity or a NaN);
- from f32, to nearest even: a normal result by the bias trick on the bits
  (`bits + half - 1 + lowest kept bit`, shifted, rebiased), past the largest finite value an
  infinity (E5M2) or NaN (E4M3FN, which has none); a result below the smallest normal
  `roundeven(|x| * 2^(bias - 1 + mantissa bits))`, exact in f32; a NaN the format's quiet NaN
  with its sign.

Other conversions (f8 from f64, other 8-bit formats) are left: such a kernel still runs on
the interpreter. Scalars and vectors alike."""

from dataclasses import dataclass

from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir
from mlirxla.transforms.erasure import erase

from .bf16_truncation import element_type, like

F32_MANTISSA_BITS, F32_BIAS = 23, 127
F32_QUIET_NAN, F32_INFINITY, F32_MAGNITUDE = 0x7FC00000, 0x7F800000, 0x7FFFFFFF
SIGN_BIT = 0x80
ROUND_EVEN = "math.roundeven"


@dataclass(frozen=True)
class Format:
    exponent_bits: int
    mantissa_bits: int
    bias: int
    infinities: bool  # E5M2: an all-ones exponent is an infinity (mantissa 0) or a NaN; E4M3FN: only S.1111.111 is NaN

    @property
    def quiet_nan(self) -> int:
        return (1 << 7) - 1 if not self.infinities else ((1 << self.exponent_bits) - 1) << self.mantissa_bits | 1 << (self.mantissa_bits - 1)

    @property
    def infinity(self) -> int:
        return ((1 << self.exponent_bits) - 1) << self.mantissa_bits

    @property
    def largest_finite(self) -> int:
        return self.infinity - 1 if self.infinities else (1 << 7) - 2


def format_of(kind: ir.Type) -> Format | None:
    element = element_type(kind)
    if isinstance(element, ir.Float8E4M3FNType):
        return Format(4, 3, 7, infinities=False)
    if isinstance(element, ir.Float8E5M2Type):
        return Format(5, 2, 15, infinities=True)
    return None


def expand_float8_conversions(root) -> int:
    """Expand every f8 -> f32 `arith.extf` and f32 -> f8 `arith.truncf` under `root`; how many."""
    expanded = 0
    for op in ops_named(root, "arith.extf", "arith.truncf"):
        source, result = op.operands[0].type, op.results[0].type
        f32 = ir.F32Type.get()
        widening = op.name == "arith.extf" and format_of(source) is not None and element_type(result) == f32
        narrowing = op.name == "arith.truncf" and format_of(result) is not None and element_type(source) == f32
        if not (widening or narrowing):
            continue
        with ir.InsertionPoint(op), op.location:
            builder = Builder(source)
            replacement = (widened(builder, op.operands[0], format_of(source)) if widening
                           else narrowed(builder, op.operands[0], format_of(result), result))
            op.results[0].replace_all_uses_with(replacement)
        erase(op)
        expanded += 1
    return expanded


class Builder:
    """arith ops on i32 (or vectors of it) shaped as the converted value."""

    def __init__(self, kind: ir.Type):
        self.i32, self.i8 = like(kind, ir.IntegerType.get_signless(32)), like(kind, ir.IntegerType.get_signless(8))
        self.i1, self.f32 = like(kind, ir.IntegerType.get_signless(1)), like(kind, ir.F32Type.get())

    def op(self, name: str, operands: list, result: ir.Type | None = None, attributes: dict | None = None) -> ir.Value:
        return ir.Operation.create(name, results=[result or self.i32], operands=operands, attributes=attributes or {}).result

    def constant(self, number, kind: ir.Type | None = None) -> ir.Value:
        kind = kind or self.i32
        element = element_type(kind)
        attribute = ir.FloatAttr.get(element, number) if isinstance(element, ir.F32Type) else ir.IntegerAttr.get(element, number)
        if isinstance(kind, ir.VectorType):
            attribute = ir.DenseElementsAttr.get_splat(kind, attribute)
        return self.op("arith.constant", [], kind, {"value": attribute})

    def binary(self, name: str, a: ir.Value, b) -> ir.Value:
        return self.op(name, [a, b if isinstance(b, ir.Value) else self.constant(b)])

    def compare(self, predicate: str, a: ir.Value, b) -> ir.Value:
        codes = {"eq": 0, "ne": 1, "sgt": 4, "ult": 6, "ugt": 8}
        return self.op("arith.cmpi", [a, b if isinstance(b, ir.Value) else self.constant(b)], self.i1,
                       {"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), codes[predicate])})

    def select(self, condition: ir.Value, a, b) -> ir.Value:
        pick = lambda v: v if isinstance(v, ir.Value) else self.constant(v)
        return self.op("arith.select", [condition, pick(a), pick(b)])


def widened(b: Builder, value: ir.Value, f: Format) -> ir.Value:
    bits = b.op("arith.extui", [b.op("arith.bitcast", [value], b.i8)])
    sign = b.binary("arith.shli", b.binary("arith.andi", bits, SIGN_BIT), 24)
    exponent = b.binary("arith.andi", b.binary("arith.shrui", bits, f.mantissa_bits), (1 << f.exponent_bits) - 1)
    mantissa = b.binary("arith.andi", bits, (1 << f.mantissa_bits) - 1)
    normal = b.binary("arith.ori", b.binary("arith.shli", b.binary("arith.addi", exponent, F32_BIAS - f.bias), F32_MANTISSA_BITS),
                      b.binary("arith.shli", mantissa, F32_MANTISSA_BITS - f.mantissa_bits))
    scaled = b.op("arith.mulf", [b.op("arith.uitofp", [mantissa], b.f32), b.constant(2.0 ** (1 - f.bias - f.mantissa_bits), b.f32)], b.f32)
    magnitude = b.select(b.compare("eq", exponent, 0), b.op("arith.bitcast", [scaled]), normal)
    if f.infinities:
        top = b.compare("eq", exponent, (1 << f.exponent_bits) - 1)
        special = b.select(b.compare("eq", mantissa, 0), F32_INFINITY, F32_QUIET_NAN)
        magnitude = b.select(top, special, magnitude)
    else:
        magnitude = b.select(b.compare("eq", b.binary("arith.andi", bits, (1 << 7) - 1), (1 << 7) - 1), F32_QUIET_NAN, magnitude)
    return b.op("arith.bitcast", [b.binary("arith.ori", sign, magnitude)], b.f32)


def narrowed(b: Builder, value: ir.Value, f: Format, result_type: ir.Type) -> ir.Value:
    bits = b.op("arith.bitcast", [value])
    sign = b.binary("arith.andi", b.binary("arith.shrui", bits, 24), SIGN_BIT)
    magnitude = b.binary("arith.andi", bits, F32_MAGNITUDE)
    shift = F32_MANTISSA_BITS - f.mantissa_bits
    lowest_kept = b.binary("arith.andi", b.binary("arith.shrui", magnitude, shift), 1)
    rounded = b.binary("arith.addi", magnitude, b.binary("arith.addi", lowest_kept, (1 << (shift - 1)) - 1))
    normal = b.binary("arith.subi", b.binary("arith.shrui", rounded, shift), (F32_BIAS - f.bias) << f.mantissa_bits)
    past_largest = f.infinity if f.infinities else f.quiet_nan
    normal = b.select(b.compare("sgt", normal, f.largest_finite), past_largest, normal)
    absolute = b.op("arith.bitcast", [magnitude], b.f32)
    scaled = b.op("arith.mulf", [absolute, b.constant(2.0 ** (f.bias - 1 + f.mantissa_bits), b.f32)], b.f32)
    subnormal = b.op("arith.fptoui", [b.op(ROUND_EVEN, [scaled], b.f32)])
    smallest_normal = (F32_BIAS + 1 - f.bias) << F32_MANTISSA_BITS
    encoded = b.select(b.compare("ult", magnitude, smallest_normal), subnormal, normal)
    encoded = b.select(b.compare("ugt", magnitude, F32_INFINITY), f.quiet_nan, encoded)
    byte = b.op("arith.trunci", [b.binary("arith.ori", sign, encoded)], b.i8)
    return b.op("arith.bitcast", [byte], result_type)
