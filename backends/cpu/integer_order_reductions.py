"""f32 max and min reductions as three integer reductions of the elements' bits.

XLA's maximum and minimum propagate NaN and order -0 below +0. As an accumulating
`arith.maximumf` (`llvm.maximum`) x86 has no instruction for that: each vector of a row
maximum took six (vmaxps, the sign-ordering blend and its move, the NaN compare and its
move), and the reduction's horizontal end ran as a chain of scalar compares and selects
(a masked softmax's row maximum was about a third of its kernel's time).

The bits of an f32, read as an integer, order the floats of one sign: as a signed integer
the non-negative ones (+0 lowest, +NaN above +inf), as an unsigned integer the negative ones
by magnitude (-0 lowest, -NaN above -inf). So over the bits b of the elements (the
reduction's initial value counted among them) three integer reductions, each one
instruction a vector on any x86 with SSE4.1 (vpmaxsd, vpmaxud, vpminud) and vectorized by
LLVM like an integer sum, give the exact answer:

- smax(b) > bits(+inf) signed, or umax(b) > bits(-inf) unsigned: a NaN is among them (NaN);
- max: smax(b) >= 0 when some element has its sign bit clear, and is then the largest of
  those (+0 above every negative, -0 included); else all are negative or -0 and the largest
  is the one of least magnitude, umin(b);
- min: umax(b) has its sign bit set when some element has, and is then the negative of
  largest magnitude (-0 below +0); else all are non-negative and the least is umin(b).

A decode after the reduction (an elementwise `linalg.generic` over the reduced tensor, which
row fusion runs with the row it finishes) makes the f32 result. It applies to a
`linalg.generic` on tensors into one f32 result whose body ends in `arith.maximumf` or
`minimumf` of the accumulator (read nowhere else) and an f32 value, after bf16 and f16 max
and min reductions took f32 accumulators (`narrow_reductions.py`).
"""

import numpy as np

from mlirxla.mlir import ir, linalg
from mlirxla.transforms.erasure import erase

from .narrow_reductions import elementwise, rewrite_order_reductions

ORDER_OPS = ("arith.maximumf", "arith.minimumf")
POSITIVE_INFINITY_BITS = 0x7F800000
NEGATIVE_INFINITY_BITS = -8388608  # 0xFF800000 as i32
QUIET_NAN = float("nan")
SIGNED_GREATER, SIGNED_GREATER_OR_EQUAL, SIGNED_LESS, UNSIGNED_GREATER = 4, 5, 2, 8  # arith.cmpi predicates


def reduce_in_integer_order(module: ir.Module) -> int:
    """Rewrite every f32 max and min reduction of `module`; how many."""
    return rewrite_order_reductions(module, order_reduction, rewrite)


def order_reduction(generic: ir.Operation) -> ir.Operation | None:
    """The body's max or min when `generic` is an f32 max or min reduction into one result."""
    if len(generic.results) != 1 or not any("reduction" in str(attr) for attr in ir.ArrayAttr(generic.attributes["iterator_types"])):
        return None
    result_type = generic.results[0].type
    if not isinstance(result_type, ir.RankedTensorType) or not isinstance(ir.RankedTensorType(result_type).element_type, ir.F32Type):
        return None
    block = generic.regions[0].blocks[0]
    yielded = list(block.operations)[-1].operands[0]
    order_op = yielded.owner if not isinstance(yielded.owner, ir.Block) else None
    if order_op is None or order_op.name not in ORDER_OPS or order_op.parent != generic:
        return None
    accumulator = block.arguments[len(block.arguments) - 1]
    operands = list(order_op.operands)
    if operands[0] == operands[1] or accumulator not in operands or len(list(accumulator.uses)) != 1:
        return None
    return order_op


def integer(value: int) -> ir.Value:
    i32 = ir.IntegerType.get_signless(32)
    return ir.Operation.create("arith.constant", results=[i32], attributes={"value": ir.IntegerAttr.get(i32, value)}).result


def compare(predicate: int, a: ir.Value, b: ir.Value) -> ir.Value:
    return ir.Operation.create("arith.cmpi", results=[ir.IntegerType.get_signless(1)], operands=[a, b],
                               attributes={"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), predicate)}).result


def select(condition: ir.Value, if_true: ir.Value, if_false: ir.Value) -> ir.Value:
    return ir.Operation.create("arith.select", results=[if_true.type], operands=[condition, if_true, if_false]).result


def initial_bits(initial: ir.Value, bits_type: ir.RankedTensorType) -> ir.Value:
    """The bits of the reduction's initial values, a tensor of its own: a fill of a constant
    becomes a fill of its bits (the float fill then dies), anything else is bitcast."""
    fill = initial.owner if not isinstance(initial.owner, ir.Block) else None
    constant = fill.operands[0].owner if fill is not None and fill.name == "linalg.fill" else None
    if constant is None or isinstance(constant, ir.Block) or constant.name != "arith.constant":
        return elementwise(initial, bits_type, "arith.bitcast")
    value = ir.FloatAttr(constant.attributes["value"]).value
    bits = integer(int(np.array(value, np.float32).view(np.int32)))
    return linalg.fill(bits, outs=[ir.Operation.create("tensor.empty", results=[bits_type]).result])


def rewrite(generic: ir.Operation, order_op: ir.Operation) -> None:
    """`generic` replaced by its three integer reductions and their decode."""
    i32 = ir.IntegerType.get_signless(32)
    float_type = ir.RankedTensorType(generic.results[0].type)
    bits_type = ir.RankedTensorType.get(float_type.shape, i32)
    inputs = list(generic.operands)[:-1]
    initials = [initial_bits(generic.operands[len(inputs)], bits_type) for _ in range(3)]
    maps = list(ir.ArrayAttr(generic.attributes["indexing_maps"]))
    reduction = ir.Operation.create(
        "linalg.generic", results=[bits_type] * 3, operands=inputs + initials, regions=1,
        attributes={"indexing_maps": ir.ArrayAttr.get(maps + [maps[-1]] * 2),
                    "iterator_types": generic.attributes["iterator_types"],
                    "operandSegmentSizes": ir.DenseI32ArrayAttr.get([len(inputs), 3])})
    old_block = generic.regions[0].blocks[0]
    block = reduction.regions[0].blocks.append(*[argument.type for argument in list(old_block.arguments)[:-1]], i32, i32, i32)
    for old, new in zip(list(old_block.arguments)[:-1], block.arguments):
        old.replace_all_uses_with(new)
    accumulator = old_block.arguments[len(old_block.arguments) - 1]
    element = next(operand for operand in order_op.operands if operand != accumulator)
    with ir.InsertionPoint(block):
        bits = ir.Operation.create("arith.bitcast", results=[i32], operands=[element])
        largest_signed, largest_unsigned, least_unsigned = (
            ir.Operation.create(name, results=[i32], operands=[carried, bits.result]).result
            for name, carried in zip(("arith.maxsi", "arith.maxui", "arith.minui"), list(block.arguments)[-3:]))
        ir.Operation.create("linalg.yield", operands=[largest_signed, largest_unsigned, least_unsigned])
    for op in list(old_block.operations)[:-1]:
        if op.operation != order_op:
            op.operation.move_before(bits)
    decoded = decode(list(reduction.results), float_type, order_op.name == "arith.maximumf")
    generic.results[0].replace_all_uses_with(decoded)
    initial = generic.operands[len(inputs)].owner
    erase(generic)
    if not isinstance(initial, ir.Block) and initial.name == "linalg.fill" and not list(initial.results[0].uses):
        erase(initial)  # bufferized, a dead fill would still take scratch


def decode(reductions: list[ir.Value], float_type: ir.RankedTensorType, maximum: bool) -> ir.Value:
    """The f32 max (or min) from smax, umax and umin of the bits, elementwise."""
    rank = float_type.rank
    identity = ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))
    empty = ir.Operation.create("tensor.empty", results=[float_type]).result
    generic = ir.Operation.create(
        "linalg.generic", results=[float_type], operands=reductions + [empty], regions=1,
        attributes={"indexing_maps": ir.ArrayAttr.get([identity] * 4),
                    "iterator_types": ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<parallel>")] * rank),
                    "operandSegmentSizes": ir.DenseI32ArrayAttr.get([3, 1])})
    i32 = ir.IntegerType.get_signless(32)
    f32 = ir.F32Type.get()
    block = generic.regions[0].blocks.append(i32, i32, i32, f32)
    largest_signed, largest_unsigned, least_unsigned = list(block.arguments)[:3]
    with ir.InsertionPoint(block):
        zero = integer(0)
        if maximum:
            bits = select(compare(SIGNED_GREATER_OR_EQUAL, largest_signed, zero), largest_signed, least_unsigned)
        else:
            bits = select(compare(SIGNED_LESS, largest_unsigned, zero), largest_unsigned, least_unsigned)
        value = ir.Operation.create("arith.bitcast", results=[f32], operands=[bits]).result
        nan = ir.Operation.create("arith.ori", results=[ir.IntegerType.get_signless(1)], operands=[
            compare(SIGNED_GREATER, largest_signed, integer(POSITIVE_INFINITY_BITS)),
            compare(UNSIGNED_GREATER, largest_unsigned, integer(NEGATIVE_INFINITY_BITS))]).result
        quiet_nan = ir.Operation.create("arith.constant", results=[f32], attributes={"value": ir.FloatAttr.get(f32, QUIET_NAN)}).result
        ir.Operation.create("linalg.yield", operands=[select(nan, quiet_nan, value)])
    return generic.result
