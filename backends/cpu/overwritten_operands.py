"""Operands a kernel's results overwrite are read before they are overwritten.

Buffer assignment may give a kernel's result its operand's buffer: the kernel then reads the
operand through the result's argument (`kernel_source.kernel_function`), and empty-tensor
elimination lets the loop nest computing the result write straight into that memory. That is
sound when nothing reads the operand after that loop nest. With several results it need not
be: a while loop's step computing two carried arrays from both (jax's binary search moves
its `lo` and `hi` bounds; `random.gamma`'s rejection loop its samples and acceptance) is two
loop nests, and the second read the first one's bounds already overwritten. One-shot
bufferization cannot see it: the operand's tensor and the one empty-tensor elimination makes
for the destination are both `restrict` views of one memref, which it takes for two buffers.

So before bufferization, for each operand read through a result's argument, the loop nest
writing that result must be the last reader of the operand:
- a later elementwise loop nest over the same iteration space that reads the operand where it
  writes (jax's sibling selects) joins the writer in one `linalg.generic` with both results:
  one loop nest, which reads every operand at an index before it writes any result there;
- any other later reader reads a copy of the operand taken before the writer runs
  (`bufferization.alloc_tensor ... copy`), which is what copy insertion's copy after the
  kernel cost before, and is always correct.
"""

from mlirxla.errors import MlirxlaError
from mlirxla.ir_queries import defining_op, ops_named
from mlirxla.mlir import ir
from mlirxla.transforms.fusion_legality import ancestor_in_block

RESHAPES = ("tensor.expand_shape", "tensor.collapse_shape", "builtin.unrealized_conversion_cast")
VIEWS = RESHAPES + ("tensor.extract_slice",)
MEMREF_VIEWS = ("memref.expand_shape", "memref.collapse_shape", "memref.subview", "memref.reinterpret_cast")


def keep_overwritten_operands_readable(module: ir.Module) -> tuple[int, int]:
    """Merge or copy as above in every kernel of `module`: (loop nests merged, operands copied).
    Until nothing changes: a join moves a writer to its sibling's place, which may put a read
    of another overwritten operand after that operand's writer. That ends: a join leaves one
    loop nest fewer, and a copy leaves its operand no late reader, so an operand copied twice
    is an error, never another round."""
    merged = copied = 0
    for function in ops_named(module, "func.func"):
        if not function.regions[0].blocks:
            continue
        block = function.regions[0].blocks[0]
        copied_arguments: set[int] = set()
        changed = True
        while changed:
            changed = False
            for operand, argument in overwritten_operands(block):
                joins, copy = keep_readable(block, operand, argument)
                number = ir.BlockArgument(argument).arg_number
                if copy:
                    if number in copied_arguments:
                        raise MlirxlaError(f"kernel {ir.StringAttr(function.attributes['sym_name']).value}: argument {number}, "
                                           "overwritten by a result, is still read after its writer once copied (an mlirxla defect)")
                    copied_arguments.add(number)
                merged, copied, changed = merged + joins, copied + copy, changed or joins + copy > 0
    return merged, copied


def keep_readable(block: ir.Block, operand: ir.Value, argument: ir.Value) -> tuple[int, int]:
    """Join the writer of `argument` with its later siblings reading `operand`, then let the
    other later readers read a copy: (nests joined, copies made)."""
    joins, late, first = 0, [], None
    while (value := materialized_value(block, argument)) is not None:
        writer, first = ancestor_in_block(defining_op(value), block), first_writer(value, block)
        late = late_readers(operand, first)
        if not late or first != writer or (joined := join_siblings(writer, late[0], operand)) is None:
            break
        joins += 1
    if late:
        read_copy(operand, late, first)
    return joins, int(bool(late))


def overwritten_operands(block: ir.Block) -> list[tuple[ir.Value, ir.Value]]:
    """(operand tensor, kernel argument) for each operand read through a result's argument:
    the writable `to_tensor` views of the kernel's arguments."""
    return [(op.results[0], op.operands[0]) for op in block.operations
            if op.operation.name == "bufferization.to_tensor" and "writable" in op.attributes
            and isinstance(op.operands[0].owner, ir.Block)]


def materialized_value(block: ir.Block, argument: ir.Value) -> ir.Value | None:
    """What the kernel materializes into `argument` (or a view of it), seen through casts and
    reshapes; None when that is no op's result."""
    for op in block.operations:
        if op.operation.name != "bufferization.materialize_in_destination" or root_memref(op.operands[1]) != argument:
            continue
        value = unreshaped(op.operands[0])
        return None if defining_op(value) is None else value
    return None


def first_writer(value: ir.Value, block: ir.Block) -> ir.Operation:
    """The first top-level op writing the memory `value` is materialized into: destination
    operands chain loop nests into one buffer (`materialization.write_over_dying_operands`,
    a DUS's `insert_slice`), and empty-tensor elimination gives the whole chain the kernel's
    destination, so it is written from the chain's first op on."""
    op, index = ancestor_in_block(defining_op(value), block), ir.OpResult(value).result_number
    while True:
        if op.name.startswith("linalg.") and len(op.results) > 0:
            destination = op.operands[len(op.operands) - len(op.results) + index]
        elif op.name == "tensor.insert_slice":
            destination = op.operands[1]
        else:
            return op
        destination = unreshaped(destination)
        producer = defining_op(destination)
        if producer is None or producer.name in ("tensor.empty", "bufferization.to_tensor") or producer.block != block:
            return op
        op, index = producer, ir.OpResult(destination).result_number


def unreshaped(value: ir.Value) -> ir.Value:
    while (producer := defining_op(value)) is not None and producer.name in RESHAPES:
        value = producer.operands[0]
    return value


def root_memref(value: ir.Value) -> ir.Value:
    while (producer := defining_op(value)) is not None and producer.name in MEMREF_VIEWS:
        value = producer.operands[0]
    return value


def late_readers(operand: ir.Value, writer: ir.Operation) -> list[ir.Operation]:
    """The top-level ops after `writer` that read `operand` (or a view of it), in block order."""
    block = writer.block
    readers = []
    for use in uses_through_views(operand):
        reader = ancestor_in_block(use.owner, block)
        if writer.is_before_in_block(reader) and reader not in readers:
            readers.append(reader)
    return sorted(readers, key=lambda op: sum(1 for other in readers if other.is_before_in_block(op)))


def uses_through_views(value: ir.Value, all_uses: bool = False) -> list[ir.OpOperand]:
    """The uses of `value` and of the views of it, the views' own uses only with `all_uses`."""
    found, work = [], [value]
    while work:
        for use in work.pop().uses:
            if use.owner.name in VIEWS:
                work.append(use.owner.results[0])
            if all_uses or use.owner.name not in VIEWS:
                found.append(use)
    return found


def join_siblings(first: ir.Operation, second: ir.Operation, operand: ir.Value) -> ir.Operation | None:
    """`first` and `second` as one `linalg.generic` at `second`'s place, when both are
    elementwise loop nests over the same iteration space that read `operand` only where they
    write, and nothing reads `first`'s results before `second`; None otherwise."""
    if not (is_elementwise_nest(first, operand) and is_elementwise_nest(second, operand)):
        return None
    if first.attributes["iterator_types"] != second.attributes["iterator_types"]:
        return None
    if any(not second.is_before_in_block(ancestor_in_block(use.owner, second.block))
           for result in first.results for use in result.uses):
        return None
    first_inputs, first_outputs = split_operands(first)
    second_inputs, second_outputs = split_operands(second)
    first_maps, second_maps = maps_of(first), maps_of(second)
    read = list(zip(first_inputs, first_maps))
    new_reads = [pair for pair in zip(second_inputs, second_maps) if pair not in read]
    inputs = [value for value, _ in read + new_reads]
    outputs = first_outputs + second_outputs
    maps = [m for _, m in read + new_reads] + first_maps[len(first_inputs):] + second_maps[len(second_inputs):]
    with ir.InsertionPoint(second), second.location:
        joined = ir.Operation.create(
            "linalg.generic", results=[r.type for r in first.results] + [r.type for r in second.results],
            operands=inputs + outputs, regions=1,
            attributes={"indexing_maps": ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
                        "iterator_types": first.attributes["iterator_types"],
                        "operandSegmentSizes": ir.DenseI32ArrayAttr.get([len(inputs), len(outputs)])})
    first_block, second_block = first.regions[0].blocks[0], second.regions[0].blocks[0]
    first_arguments, second_arguments = list(first_block.arguments), list(second_block.arguments)
    second_reads = second_arguments[:len(second_inputs)]
    # the joined payload's arguments: first's inputs, second's new inputs, first's outputs, second's outputs
    ordered = (first_arguments[:len(first_inputs)]
               + [argument for argument, pair in zip(second_reads, zip(second_inputs, second_maps)) if pair in new_reads]
               + first_arguments[len(first_inputs):] + second_arguments[len(second_inputs):])
    block = joined.regions[0].blocks.append(*[argument.type for argument in ordered])
    for argument, pair in zip(second_reads, zip(second_inputs, second_maps)):
        if pair in read:
            argument.replace_all_uses_with(first_arguments[read.index(pair)])
    for old, new in zip(ordered, block.arguments):
        old.replace_all_uses_with(new)
    first_yield, second_yield = terminator(first_block), terminator(second_block)
    with ir.InsertionPoint(block), second.location:
        joined_yield = ir.Operation.create("linalg.yield", operands=list(first_yield.operands) + list(second_yield.operands))
    for old_block, old_yield in ((first_block, first_yield), (second_block, second_yield)):
        for op in list(old_block.operations):
            if op.operation != old_yield:
                op.operation.move_before(joined_yield)
    for old, new in zip(list(first.results) + list(second.results), joined.results):
        old.replace_all_uses_with(new)
    first.erase()
    second.erase()
    return joined


def is_elementwise_nest(op: ir.Operation, operand: ir.Value) -> bool:
    """A `linalg.generic` of parallel loops writing its results at the loop index and reading
    `operand` there too (other inputs may be broadcast)."""
    if op.name != "linalg.generic":
        return False
    if not all("parallel" in str(iterator) for iterator in ir.ArrayAttr(op.attributes["iterator_types"])):
        return False
    inputs, outputs = split_operands(op)
    maps = maps_of(op)
    identity = ir.AffineMap.get_identity(len(ir.ArrayAttr(op.attributes["iterator_types"])))
    views = {use.owner.results[0] for use in uses_through_views(operand, all_uses=True) if use.owner.name in VIEWS}
    return (all(m == identity for m in maps[len(inputs):])
            and all(value == operand and m == identity for value, m in zip(inputs, maps) if value == operand or value in views))


def split_operands(op: ir.Operation) -> tuple[list[ir.Value], list[ir.Value]]:
    count = len(op.results)
    operands = list(op.operands)
    return operands[:len(operands) - count], operands[len(operands) - count:]


def maps_of(op: ir.Operation) -> list[ir.AffineMap]:
    return [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]


def terminator(block: ir.Block) -> ir.Operation:
    return block.operations[len(block.operations) - 1].operation


def read_copy(operand: ir.Value, readers: list[ir.Operation], writer: ir.Operation) -> None:
    """`readers` read a copy of `operand`, taken where `operand` is defined: before `writer`,
    the first op writing its memory. The view of the argument is moved there when it came
    later (it depends on nothing else): a result that is another operand unchanged is a copy
    of that operand, placed right after that operand's view, which may come first."""
    source = defining_op(operand)
    if not source.is_before_in_block(writer):
        source.move_before(writer)
    with ir.InsertionPoint.after(source), source.location:
        copy = ir.Operation.create("bufferization.alloc_tensor", results=[operand.type], operands=[operand],
                                   attributes={"operandSegmentSizes": ir.DenseI32ArrayAttr.get([0, 1, 0])}).result
    block = readers[0].block
    for use in uses_through_views(operand):
        if ancestor_in_block(use.owner, block) in readers:
            redirect(use, operand, copy)


def redirect(use: ir.OpOperand, operand: ir.Value, copy: ir.Value) -> None:
    """Make the reader of `use` read `copy` where it read `operand`: the view chain between
    them is cloned on the copy."""
    user = use.owner
    chain = [user]
    value = user.operands[use.operand_number]
    while value != operand:
        chain.append(defining_op(value))
        value = chain[-1].operands[0]
    replacement = copy
    for view in reversed(chain[1:]):
        clone = view.clone(ir.InsertionPoint(user))
        clone.operands[0] = replacement
        replacement = clone.results[0]
    user.operands[use.operand_number] = replacement
