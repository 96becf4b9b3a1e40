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

Only a `linalg.generic` on tensors whose body is one `arith.maximumf`/`minimumf` (or
`maxnumf`/`minnumf`) of its input and its narrow accumulator changes.
"""

from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir

NARROW = (ir.BF16Type, ir.F16Type)
ORDER_OPS = ("arith.maximumf", "arith.minimumf", "arith.maxnumf", "arith.minnumf")


def widen_narrow_min_max_reductions(module: ir.Module) -> int:
    """Rewrite every such reduction in `module`; how many."""
    widened = 0
    for generic in ops_named(module, "linalg.generic"):
        if narrow_order_reduction(generic):
            with ir.InsertionPoint(generic), generic.location:
                widen(generic)
            widened += 1
    return widened


def narrow_order_reduction(generic: ir.Operation) -> str | None:
    """The body's order op when `generic` is a narrow max/min reduction into one result."""
    if len(generic.results) != 1 or len(generic.operands) != 2:
        return None
    if not any("reduction" in str(attr) for attr in ir.ArrayAttr(generic.attributes["iterator_types"])):
        return None
    result_type = generic.results[0].type
    if not isinstance(result_type, ir.RankedTensorType) or not isinstance(ir.RankedTensorType(result_type).element_type, NARROW):
        return None
    block = generic.regions[0].blocks[0]
    body = [op.operation for op in block.operations]
    if len(body) != 2 or body[0].name not in ORDER_OPS or body[1].name != "linalg.yield":
        return None
    element_in, accumulator = block.arguments[0], block.arguments[1]
    if {body[0].operands[0], body[0].operands[1]} != {element_in, accumulator} or body[1].operands[0] != body[0].results[0]:
        return None
    if element_in.type != accumulator.type:
        return None
    return body[0].name


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


def widen(generic: ir.Operation) -> None:
    narrow_type = ir.RankedTensorType(generic.results[0].type)
    f32 = ir.F32Type.get()
    wide_type = ir.RankedTensorType.get(narrow_type.shape, f32)
    element, initial = generic.operands[0], generic.operands[1]
    wide_initial = elementwise(initial, wide_type, "arith.extf")
    order_op = generic.regions[0].blocks[0].operations[0].operation
    wide = ir.Operation.create(
        "linalg.generic", results=[wide_type], operands=[element, wide_initial], regions=1,
        attributes={name: generic.attributes[name] for name in ("indexing_maps", "iterator_types", "operandSegmentSizes")})
    block = wide.regions[0].blocks.append(ir.RankedTensorType(element.type).element_type, f32)
    with ir.InsertionPoint(block):
        widened = ir.Operation.create("arith.extf", results=[f32], operands=[block.arguments[0]]).result
        combined = ir.Operation.create(order_op.name, results=[f32], operands=[block.arguments[1], widened]).result
        ir.Operation.create("linalg.yield", operands=[combined])
    narrow = elementwise(wide.result, narrow_type, "arith.truncf")
    generic.results[0].replace_all_uses_with(narrow)
    generic.erase()
