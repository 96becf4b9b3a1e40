"""A concatenate a kernel writes to one of its results becomes its operands written into
slices of that result.

The toolkit's `stablehlo-legalize-to-linalg` lowers a concatenate to one loop nest over the
result that picks, element by element, which operand to read (a chain of compares and
selects on the index along the concatenated dimension). LLVM cannot vectorize that loop, and
each operand computed by another op of the kernel (a transpose) is first materialized into
scratch and read back through it: transformer_grad's transpose_add_fusion (three [1, 0, 2]
transposes concatenated into a 128x768 result and summed down its columns) spent most of its
time in the scalar select loop. Written as `tensor.insert_slice`s into an empty tensor (what
IREE's StableHLO input conversion does, and XLA's concatenate emitter, one operand at a
time), the chain bufferizes into the destination: an operand's loop nest writes its slice
of the result directly (empty-tensor elimination), or one contiguous copy moves it there, and
the other ops reading the concatenate read the result.

A concatenate of concatenates that only it reads (`jnp.block`: rows of columns) places the
inner ones' operands directly, each into its own slice of the result: each inner concatenate
was computed into scratch and copied over (a 1024 x 1024 block 0.99 -> 0.43 ms, XLA:CPU 0.58).

Only concatenates whose result is a kernel result are rewritten: one feeding other ops only
fuses into them as the select chain and is never materialized, which the slices would force.
When the result goes nowhere else, the slices are inserted into the kernel argument itself
(`bufferization.to_tensor`, made first): from an empty tensor, empty-tensor elimination
anchored the first operand's loop nest on that empty tensor, bufferization allocated the
whole result for it (kernel scratch) and copied the slice over.

Operands that are all reshapes splitting the concatenated dimension the same way (attention
heads merged: [b, s, h, d] transposes reshaped to [b, s, h * d], concatenated along the last
dimension into the [b, s, 3 h d] gradient of a fused qkv projection) are concatenated before
the reshapes instead, into the argument seen with that dimension split
(`memref.expand_shape`, a view): each transpose's loop nest writes its slice directly, where
through the reshapes each was materialized into scratch and copied (a GPT training step:
four such kernels of 1.5 MiB, 0.44 ms each).
"""

from math import prod

from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir
from mlirxla.transforms import erasure


def concatenated_results_as_slices(module: ir.Module) -> int:
    """Rewrite every static concatenate of `module` that a kernel result materializes; how
    many were rewritten."""
    rewritten = 0
    for op in erasure.live_ops(ops_named(module, "stablehlo.concatenate")):
        result_type = ir.RankedTensorType(op.results[0].type)
        if len(op.operands) < 2 or not result_type.has_static_shape or not materialized(op.results[0]):
            continue
        with ir.InsertionPoint(op), op.location:
            split = split_reshapes(op)
            if split is not None:
                concatenated_before_the_reshapes(op, *split)
            else:
                op.results[0].replace_all_uses_with(inserted_slices(op.operands, op, result_type, destination_tensor(op)))
        operands = list(op.operands)
        erasure.erase(op)
        erase_nested(operands)
        rewritten += 1
    return rewritten


def only_destination(op: ir.Operation) -> tuple[ir.Operation, ir.Value] | None:
    """(its write, the destination) when concatenate `op` goes only to a kernel argument or
    to a reshaped view of one (`materialization.unreshaped_result`: a concatenate reshaped
    into a result, a gated activation's gradient, went through scratch and was copied out)."""
    uses = list(op.results[0].uses)
    if len(uses) != 1:
        return None
    destination = uses[0].owner.operands[1]
    if isinstance(destination, ir.BlockArgument):
        return uses[0].owner, destination
    view = destination.owner
    if view.name == "memref.reinterpret_cast" and isinstance(view.operands[0], ir.BlockArgument):
        return uses[0].owner, destination
    return None


def after_definition(value: ir.Value) -> ir.InsertionPoint:
    """Where ops reading destination `value` may go, before any op of the kernel: the start of
    the block for an argument; right after its view, moved to the start of the block (it
    reads only an argument, and was made where the result is written, after the ops
    computing it), for a view."""
    if isinstance(value, ir.BlockArgument):
        return ir.InsertionPoint.at_block_begin(value.owner)
    view = value.owner
    view.move_before(ir.BlockArgument(view.operands[0]).owner.operations[0])
    return ir.InsertionPoint.after(view)


def destination_tensor(op: ir.Operation) -> ir.Value | None:
    """The kernel argument (or view of one) concatenate `op` only goes to, as the tensor the
    slices are inserted into (made first); None when it goes elsewhere too."""
    found = only_destination(op)
    if found is None:
        return None
    materialize, destination = found
    with after_definition(destination):
        return writable_tensor(destination, materialize)


def writable_tensor(memref: ir.Value, materialize: ir.Operation) -> ir.Value:
    """`memref` as a tensor to write into; `materialize`, its write, no longer claims to be
    the buffer's only view (one `restrict` per buffer)."""
    shape = ir.MemRefType(memref.type)
    if "restrict" in materialize.attributes:
        del materialize.attributes["restrict"]
    tensor_type = ir.RankedTensorType.get(shape.shape, shape.element_type)
    return ir.Operation.create("bufferization.to_tensor", results=[tensor_type], operands=[memref],
                               attributes={"restrict": ir.UnitAttr.get(), "writable": ir.UnitAttr.get()}).results[0]


def split_reshapes(op: ir.Operation) -> tuple[list[ir.Value], list[int]] | None:
    """(the reshapes' sources, the concatenated dimension's split sizes for the result) when
    the concatenate goes only to a kernel argument and every operand is a reshape splitting
    its concatenated dimension into [part, trailing...] with the same trailing sizes, the
    other dimensions as they are; else None."""
    if only_destination(op) is None:
        return None
    dimension = ir.IntegerAttr(op.attributes["dimension"]).value
    sources, trailing = [], None
    for operand in op.operands:
        reshape = operand.owner
        if isinstance(reshape, ir.Block) or reshape.name != "stablehlo.reshape":
            return None
        shape, source = ir.RankedTensorType(operand.type).shape, ir.RankedTensorType(reshape.operands[0].type).shape
        extra = len(source) - len(shape)
        if extra < 1:  # a reshape adding dimensions (a unit one, `concatenates_moved_below`)
            return None
        split = source[dimension + 1:dimension + 2 + extra]
        kept = source[:dimension] + [source[dimension] * prod(split)] + source[dimension + 2 + extra:]
        if kept != shape or trailing not in (None, split):
            return None
        sources.append(reshape.operands[0])
        trailing = split
    parts = sum(ir.RankedTensorType(source.type).shape[dimension] for source in sources)
    return sources, [parts] + trailing


def concatenated_before_the_reshapes(op: ir.Operation, sources: list[ir.Value], split: list[int]) -> None:
    """Insert `sources` along the concatenate's dimension into its kernel argument seen with
    that dimension split into `split`, and write them there."""
    dimension = ir.IntegerAttr(op.attributes["dimension"]).value
    materialize, destination = only_destination(op)
    result_type = ir.RankedTensorType(op.results[0].type)
    expanded = result_type.shape[:dimension] + split + result_type.shape[dimension + 1:]
    groups = [[axis] for axis in range(dimension)] + [list(range(dimension, dimension + len(split)))]
    groups += [[axis + len(split) - 1] for axis in range(dimension + 1, len(result_type.shape))]
    with after_definition(destination):
        view = ir.Operation.create("memref.expand_shape", results=[ir.MemRefType.get(expanded, result_type.element_type)],
                                   operands=[destination], attributes={
                                       "reassociation": ir.ArrayAttr.get([ir.ArrayAttr.get(
                                           [ir.IntegerAttr.get(ir.IntegerType.get_signless(64), axis) for axis in group])
                                           for group in groups]),
                                       "static_output_shape": ir.DenseI64ArrayAttr.get(expanded)}).results[0]
        into = writable_tensor(view, materialize)
    value = inserted_slices(sources, op, ir.RankedTensorType.get(expanded, result_type.element_type), into)
    ir.Operation.create("bufferization.materialize_in_destination", results=[], operands=[value, view],
                        attributes={name: materialize.attributes[name] for name in materialize.attributes})
    erasure.erase(materialize)


def materialized(value: ir.Value) -> bool:
    """Whether `value` is written to a kernel result."""
    return any(use.owner.name == "bufferization.materialize_in_destination" and use.operand_number == 0
               for use in value.uses)


def nested_concatenate(value: ir.Value, reader: ir.Operation) -> ir.Operation | None:
    """The concatenate defining `value` when only `reader` reads it, else None."""
    op = value.owner
    if isinstance(op, ir.Block) or op.name != "stablehlo.concatenate" or any(use.owner != reader for use in value.uses):
        return None
    return op


def placed_parts(operand: ir.Value, reader: ir.Operation, origin: list[int]) -> list[tuple[ir.Value, list[int]]]:
    """(value, offsets) pairs writing `operand` of `reader` at `origin` of the result: a
    concatenate only `reader` reads placed as its own operands along its dimension,
    recursively (`jnp.block` concatenates rows of columns: the inner concatenates were a
    select loop each)."""
    inner = nested_concatenate(operand, reader)
    if inner is None:
        return [(operand, origin)]
    dimension = ir.IntegerAttr(inner.attributes["dimension"]).value
    placed = []
    for part in inner.operands:
        placed += placed_parts(part, inner, origin)
        origin = [offset + (ir.RankedTensorType(part.type).shape[axis] if axis == dimension else 0) for axis, offset in enumerate(origin)]
    return placed


def erase_nested(operands) -> None:
    """Erase the concatenates among `operands` (those `placed_parts` saw through) that
    nothing reads any more, and theirs (each once: jnp.block reads one row twice)."""
    unique = []
    for operand in operands:
        if not any(operand == seen for seen in unique):
            unique.append(operand)
    for operand in unique:
        inner = operand.owner
        if not isinstance(inner, ir.Block) and inner.name == "stablehlo.concatenate" and not list(operand.uses):
            nested = list(inner.operands)
            erasure.erase(inner)
            erase_nested(nested)


def inserted_slices(operands, op: ir.Operation, result_type: ir.RankedTensorType, into: ir.Value | None) -> ir.Value:
    """`operands` inserted one after another along concatenate `op`'s dimension into `into`,
    or into an empty tensor of `result_type`; nested concatenates as their own operands."""
    dimension = ir.IntegerAttr(op.attributes["dimension"]).value
    value = into if into is not None else ir.Operation.create("tensor.empty", results=[result_type]).results[0]
    offset = 0
    for operand in operands:
        shape = ir.RankedTensorType(operand.type).shape
        for part, offsets in placed_parts(operand, op, [offset if axis == dimension else 0 for axis in range(len(shape))]):
            sizes = ir.RankedTensorType(part.type).shape
            value = ir.Operation.create(
                "tensor.insert_slice", results=[result_type], operands=[part, value],
                attributes={"static_offsets": ir.DenseI64ArrayAttr.get(offsets),
                            "static_sizes": ir.DenseI64ArrayAttr.get(sizes),
                            "static_strides": ir.DenseI64ArrayAttr.get([1] * len(sizes)),
                            "operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 1, 0, 0, 0])}).results[0]
        offset += shape[dimension]
    return value
