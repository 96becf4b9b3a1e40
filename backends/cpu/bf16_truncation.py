"""f32 -> bf16 roundings (`arith.truncf`) become integer arithmetic that keeps a NaN's sign.

Upstream's `arith-expand{include-bf16=true}` rounds to nearest even in integer ops (what the
vectorizer widens, and no compiler-runtime call) but makes every NaN the positive quiet NaN
0x7FC0. XLA's conversion, ml_dtypes' and so jax's keep the sign: a NaN becomes 0x7FC0 or
0xFFC0, payload dropped. Signs of NaNs are not noise in bf16 programs: x86 makes the NaN of
an invalid operation (0 * inf, sqrt(-1), log(-1)) negative, so `jnp.sqrt(bf16(-1))` is 0xFFC0
on jax's cpu backend. This expansion runs before `arith-expand`, which then finds no f32 ->
bf16 rounding left: `(bits + 0x7FFF + ((bits >> 16) & 1)) >> 16`, or for a NaN
`((bits >> 16) & 0x8000) | 0x7FC0`. Scalars and vectors alike.
"""

from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir
from mlirxla.transforms.erasure import erase

QUIET_NAN = 0x7FC0
SIGN = 0x8000
ROUNDING_BIAS = 0x7FFF
UNORDERED = 14  # arith.cmpf's uno


def expand_bf16_truncations(root) -> int:
    """Expand every f32 -> bf16 `arith.truncf` under `root`; how many."""
    truncations = [op for op in ops_named(root, "arith.truncf") if is_f32_to_bf16(op)]
    for op in truncations:
        with ir.InsertionPoint(op), op.location:
            op.results[0].replace_all_uses_with(rounded_with_signed_nan(op.operands[0], op.results[0].type))
        erase(op)
    return len(truncations)


def is_f32_to_bf16(op: ir.Operation) -> bool:
    return element_type(op.operands[0].type) == ir.F32Type.get() and isinstance(element_type(op.results[0].type), ir.BF16Type)


def element_type(kind: ir.Type) -> ir.Type:
    return ir.VectorType(kind).element_type if isinstance(kind, ir.VectorType) else kind


def like(kind: ir.Type, element: ir.Type) -> ir.Type:
    """`element`, or a vector of it shaped as `kind` is."""
    return ir.VectorType.get(ir.VectorType(kind).shape, element) if isinstance(kind, ir.VectorType) else element


def rounded_with_signed_nan(value: ir.Value, bf16_type: ir.Type) -> ir.Value:
    i32 = like(value.type, ir.IntegerType.get_signless(32))
    i16 = like(value.type, ir.IntegerType.get_signless(16))
    i1 = like(value.type, ir.IntegerType.get_signless(1))

    def op(name, operands, result=i32, attributes=None):
        return ir.Operation.create(name, results=[result], operands=operands, attributes=attributes or {}).result

    def constant(number):
        attribute = ir.IntegerAttr.get(ir.IntegerType.get_signless(32), number)
        if isinstance(i32, ir.VectorType):
            attribute = ir.DenseElementsAttr.get_splat(i32, attribute)
        return op("arith.constant", [], attributes={"value": attribute})

    bits = op("arith.bitcast", [value])
    upper = op("arith.shrui", [bits, constant(16)])
    lowest_kept = op("arith.andi", [upper, constant(1)])
    bias = op("arith.addi", [lowest_kept, constant(ROUNDING_BIAS)])
    rounded = op("arith.shrui", [op("arith.addi", [bits, bias]), constant(16)])
    signed_nan = op("arith.ori", [op("arith.andi", [upper, constant(SIGN)]), constant(QUIET_NAN)])
    nan = op("arith.cmpf", [value, value], i1, {"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), UNORDERED)})
    result = op("arith.select", [nan, signed_nan, rounded])
    return op("arith.bitcast", [op("arith.trunci", [result], i16)], bf16_type)
