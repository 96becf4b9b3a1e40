"""bf16 and f16 max and min reductions accumulate in f32.

bf16 and f16 arithmetic runs in f32, rounding each op's result back to the narrow type
(`arith-emulate-unsupported-floats`, its rounding expanded to integer ops). In a reduction
that rounding sits on the loop-carried accumulator: every element costs a widening, the
compare, and a round-to-nearest-even in integer ops, one after the other, and the LLVM
vectorizer does not see a max or min reduction through the integer ops, so the loop stays a
scalar chain (a bf16 attention's row maxima ran at 3% of the memory bandwidth). The maximum
or minimum of narrow values is one of them, so rounding it changes nothing: the reduction
can carry an f32 accumulator (the narrow init widened), read the narrow elements widened,
and round once at the end (exactly). That is the f32 reduction LLVM vectorizes.

A `linalg.generic` on tensors into one narrow result changes when its body ends in one
`arith.maximumf`/`minimumf` (or `maxnumf`/`minnumf`) of the accumulator and a narrow value,
the accumulator read nowhere else: the body before it may compute that value from several
inputs (a bf16 attention's scaled and masked scores, fused into the reduction).

Such a fused element is itself a rounding: the last arithmetic op computing it (a multiply, a
convert from f32) rounds its f32 result to the narrow type, through any selects of it with
narrow values (a mask's constant). Rounding to nearest even never reverses an order (and keeps
NaN a NaN), so the maximum (minimum) of the rounded elements is the rounding of the maximum
(minimum) of the f32 ones: the reduction compares the f32 values, and the one rounding after
it is the only one. Exact, and the rounding of every element (seven integer ops a vector)
leaves the loop (transformer_bf16's masked row maxima).
"""

from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir

NARROW = (ir.BF16Type, ir.F16Type)
ORDER_OPS = ("arith.maximumf", "arith.minimumf", "arith.maxnumf", "arith.minnumf")


def widen_narrow_min_max_reductions(module: ir.Module) -> int:
    """Rewrite every such reduction in `module`; how many."""
    return rewrite_order_reductions(module, narrow_order_reduction, widen)


def rewrite_order_reductions(module: ir.Module, order_op_of, rewrite) -> int:
    """`rewrite(generic, order_op)` at each `linalg.generic` of `module` for which
    `order_op_of(generic)` finds its max or min; how many."""
    rewritten = 0
    for generic in ops_named(module, "linalg.generic"):
        order_op = order_op_of(generic)
        if order_op is not None:
            with ir.InsertionPoint(generic), generic.location:
                rewrite(generic, order_op)
            rewritten += 1
    return rewritten


def narrow_order_reduction(generic: ir.Operation) -> ir.Operation | None:
    """The body's order op when `generic` is a narrow max/min reduction into one result."""
    if len(generic.results) != 1 or not any("reduction" in str(attr) for attr in ir.ArrayAttr(generic.attributes["iterator_types"])):
        return None
    result_type = generic.results[0].type
    if not isinstance(result_type, ir.RankedTensorType) or not isinstance(ir.RankedTensorType(result_type).element_type, NARROW):
        return None
    block = generic.regions[0].blocks[0]
    body = [op.operation for op in block.operations]
    yielded = body[-1].operands[0]
    order_op = yielded.owner if not isinstance(yielded.owner, ir.Block) else None
    if order_op is None or order_op.name not in ORDER_OPS or order_op.parent != generic:
        return None
    accumulator = block.arguments[len(block.arguments) - 1]
    operands = list(order_op.operands)
    if len(operands) != 2 or operands[0] == operands[1] or accumulator not in operands or len(list(accumulator.uses)) != 1:
        return None
    element = operands[1] if operands[0] == accumulator else operands[0]
    return order_op if element.type == accumulator.type else None


def elementwise(source: ir.Value, target_type: ir.Type, cast: str) -> ir.Value:
    """`cast` applied to every element of `source`, a new tensor of `target_type`."""
    shaped = ir.RankedTensorType(target_type)
    empty = ir.Operation.create("tensor.empty", results=[target_type]).result
    rank = shaped.rank
    identity = ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))
    generic = ir.Operation.create(
        "linalg.generic", results=[target_type], operands=[source, empty], regions=1,
        attributes={"indexing_maps": ir.ArrayAttr.get([identity, identity]),
                    "iterator_types": ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<parallel>")] * rank),
                    "operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 1])})
    block = generic.regions[0].blocks.append(ir.RankedTensorType(source.type).element_type, shaped.element_type)
    with ir.InsertionPoint(block):
        converted = ir.Operation.create(cast, results=[shaped.element_type], operands=[block.arguments[0]]).result
        ir.Operation.create("linalg.yield", operands=[converted])
    return generic.result


def widen(generic: ir.Operation, order_op: ir.Operation) -> None:
    """`generic` in place with an f32 accumulator: its init widened before it, the narrow
    element widened before `order_op`, its result rounded after it."""
    narrow_type = ir.RankedTensorType(generic.results[0].type)
    f32 = ir.F32Type.get()
    wide_type = ir.RankedTensorType.get(narrow_type.shape, f32)
    initial_position = len(generic.operands) - 1
    generic.operands[initial_position] = elementwise(generic.operands[initial_position], wide_type, "arith.extf")
    block = generic.regions[0].blocks[0]
    accumulator = block.arguments[len(block.arguments) - 1]
    accumulator.set_type(f32)
    element_position = 1 if order_op.operands[0] == accumulator else 0
    with ir.InsertionPoint(order_op):
        order_op.operands[element_position] = unrounded(order_op.operands[element_position])
    order_op.results[0].set_type(f32)
    generic.results[0].set_type(wide_type)
    with ir.InsertionPoint.after(generic):
        narrow = elementwise(generic.results[0], narrow_type, "arith.truncf")
    generic.results[0].replace_all_uses_except(narrow, narrow.owner.operation)


ROUNDING_ARITHMETIC = ("arith.addf", "arith.subf", "arith.mulf", "arith.divf")


def unrounded(element: ir.Value) -> ir.Value:
    """The f32 value whose rounding to the narrow type `element` is, computed before the
    insertion point: a convert's f32 operand, the f32 op that bf16/f16 arithmetic is emulated
    by (its narrow operands widened, exactly as `arith-emulate-unsupported-floats` computes
    it), a select of such values; anything else (a block argument, a constant) widened, which
    is exact."""
    f32 = ir.F32Type.get()
    owner = element.owner
    if isinstance(owner, ir.Block):
        return widened(element)
    if owner.name == "arith.truncf" and owner.operands[0].type == f32:
        return owner.operands[0]
    if owner.name == "arith.select":
        condition, chosen, other = owner.operands
        return ir.Operation.create("arith.select", results=[f32],
                                   operands=[condition, unrounded(chosen), unrounded(other)]).result
    if owner.name in ROUNDING_ARITHMETIC and all(operand.type == element.type for operand in owner.operands):
        attributes = {name: owner.attributes[name] for name in ("fastmath",) if name in owner.attributes}
        return ir.Operation.create(owner.name, results=[f32], operands=[widened(operand) for operand in owner.operands],
                                   attributes=attributes).result
    return widened(element)


def widened(value: ir.Value) -> ir.Value:
    return ir.Operation.create("arith.extf", results=[ir.F32Type.get()], operands=[value]).result
