"""Fewer fused values in memory: rewrites of a kernel that let bufferization write what a
fusion computes into the kernel's destinations, and name what still needs memory.

A value inside a kernel reaches memory (working memory the kernel takes as scratch,
`kernel_scratch.py`) when the linalg lowering cannot fuse it into the ops reading it: a slice
or a reshape reads it, a reduction computes it, or two ops read it (a softmax's
exponentials, read by the row sum and by the division). Five rewrites keep the avoidable
ones out of memory:

- `sink_slices` (xhlo): a slice of an elementwise op or a broadcast becomes that op over
  slices of its operands, down to the kernel's inputs, whose slices are views of their
  buffers; nothing is computed that the slice drops (up to a budget of ops: a lattice of
  strided slices would be cut down to single elements);
- `concatenates_moved_below` (xhlo): a concatenate that a transpose or a reshape adding unit
  dimensions reads becomes the concatenate of its parts transposed or reshaped, which a
  result takes slice by slice (`concatenation.py`);
- `unreshaped_result` (xhlo): a result that is a reshape is written through a reshaped view
  of its destination, so the value before the reshape needs no buffer of its own;
- `write_over_dying_operands` (linalg on tensors, before bufferization): an elementwise loop
  nest writes its result over an operand of its type that nothing reads afterwards, as
  buffer assignment lets an elementwise op write over an operand dying there; the softmax's
  division then runs in place over the exponentials, which bufferization writes into the
  output itself;
- `write_padded_in_place` (linalg on tensors): a loop nest's result or a kernel input padded
  by a constant (a convolution's input) is written into the interior of the padded buffer,
  not to scratch and then copied there.

What still needs memory is named by the fused op it materializes: each op of a kernel
carries a name location (`describe`) that the lowering hands on to the allocations it makes
for the op's results (`materialized_op`).
"""

import re
from dataclasses import dataclass

from mlirxla.dialects.xhlo.builder import create_op, splat_of_type
from mlirxla.errors import jax_primitive
from mlirxla.ir_queries import defining_op, nested_ops, ops_named
from mlirxla.mlir import ir, linalg
from mlirxla.transforms import erasure
from mlirxla.transforms.algsimp_patterns import NO_MATCH, shape
from mlirxla.transforms.fusion_legality import ELEMENTWISE, kind_of

DESCRIPTION_MARK = "fused "  # starts the name location of every op cloned into a kernel


# --- naming ---------------------------------------------------------------------------------


def describe(op: ir.Operation) -> ir.Location:
    """`op`'s location with a name saying which fused op it is: its kind, its result type and
    the jax primitive it came from."""
    primitive = jax_primitive(op.location)
    origin = f" (jax {primitive})" if primitive else ""
    result = f" -> {op.results[0].type}" if len(op.results) == 1 else ""
    return ir.Location.name(f"{DESCRIPTION_MARK}{kind_of(op)}{result}{origin}", childLoc=op.location)


def materialized_op(location: ir.Location) -> str | None:
    """The fused op an allocation holds the result of, read off its location; None when the
    allocation is no fused op's (a copy bufferization made)."""
    match = re.search(rf'"{DESCRIPTION_MARK}([^"]*)"', str(location))
    return match.group(1) if match else None


# --- slices ---------------------------------------------------------------------------------


SINK_BUDGET_FLOOR = 256  # ops sinking may add to a kernel of fewer ops than this


@dataclass
class SinkBudget:
    """Ops sinking may still add to a kernel."""
    ops_left: int

    def take(self, ops: int) -> bool:
        """Charge `ops` when they fit; whether they did."""
        if ops > self.ops_left:
            return False
        self.ops_left -= ops
        return True


def sink_slices(function) -> None:
    """Rewrite slices of elementwise ops and broadcasts (read by slices only) into those ops
    over slices of their operands, until no such slice is left or the ops added reach the
    kernel's own op count (at least `SINK_BUDGET_FLOOR`): one copy of an op per distinct
    slice of it, however many ops read it (a copy per reader doubled a threefry's rounds at
    every level). The budget stops a lattice of strided slices (jax's associative_scan halves
    its operands at every level and reads each level twice) from cutting every value into
    one op per element: sinking there never ended; what is left unsunk goes through memory."""
    budget = SinkBudget(max(SINK_BUDGET_FLOOR, len(nested_ops(function))))
    sunk = True
    while sunk:
        sunk = False
        for slice_op in erasure.live_ops(ops_named(function, "xhlo.slice")):
            sunk |= sink_one_value(slice_op, budget)


def sink_one_value(slice_op: ir.Operation, budget: SinkBudget) -> bool:
    """Sink every slice of the value `slice_op` reads, when that value's op takes it and the
    copies and their operands' slices fit in `budget`; whether it did."""
    source = defining_op(slice_op.operands[0])
    if source is None or len(source.results) != 1 or not sinkable(source):
        return False
    readers = [use.owner.operation for use in source.results[0].uses]
    if not all(reader.name == "xhlo.slice" for reader in readers):
        return False
    if not budget.take(len({tuple(slice_bounds(reader)) for reader in readers}) * (1 + len(source.operands))):
        return False
    copies = {}
    for reader in readers:
        bounds = tuple(slice_bounds(reader))
        if bounds not in copies:  # one copy per slice taken: a value two ops read, each sliced alike, is sliced once
            with ir.InsertionPoint(source), reader.location:
                copies[bounds] = sliced_copy(source, reader)
        reader.results[0].replace_all_uses_with(copies[bounds])
        erasure.erase(reader)
    erasure.erase(source)
    return True


def sinkable(op: ir.Operation) -> bool:
    if op.name == "xhlo.broadcast":
        return True
    if op.name == "xhlo.constant":
        return ir.DenseElementsAttr(op.attributes["value"]).is_splat
    shape = ir.RankedTensorType(op.results[0].type).shape
    return kind_of(op) in ELEMENTWISE and all(ir.RankedTensorType(v.type).shape == shape for v in op.operands)


def sliced_copy(op: ir.Operation, slice_op: ir.Operation) -> ir.Value:
    """`op` computing only what `slice_op` keeps of its result."""
    result_type = slice_op.results[0].type
    if op.name == "xhlo.constant":
        splat = ir.DenseElementsAttr(op.attributes["value"]).get_splat_value()
        attributes = {"value": splat_of_type(splat, result_type)}
        return create_op("xhlo.constant", [], [result_type], attributes, op.location).results[0]
    bounds = slice_bounds(slice_op)
    if op.name == "xhlo.broadcast":
        dimensions = list(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
        result_shape = ir.RankedTensorType(op.results[0].type).shape
        operand = op.operands[0]
        operand_bounds = [bounds[d] if size == result_shape[d] else (0, 1, 1)
                          for d, size in zip(dimensions, ir.RankedTensorType(operand.type).shape)]
        operands = [slice_of(operand, operand_bounds, slice_op)]
    else:
        operands = [slice_of(operand, bounds, slice_op) for operand in op.operands]
    attributes = {name: op.attributes[name] for name in op.attributes}
    return create_op(op.name, operands, [result_type], attributes, op.location).results[0]


def slice_bounds(slice_op: ir.Operation) -> list[tuple[int, int, int]]:
    """(start, limit, stride) per dimension."""
    return list(zip(*(ir.DenseI64ArrayAttr(slice_op.attributes[name]) for name in ("start_indices", "limit_indices", "strides"))))


def slice_of(value: ir.Value, bounds: list[tuple[int, int, int]], like: ir.Operation) -> ir.Value:
    """`value` sliced to `bounds` by a slice like `like` (itself when the bounds take all)."""
    ranked = ir.RankedTensorType(value.type)
    if all(bound == (0, size, 1) for bound, size in zip(bounds, ranked.shape)):
        return value
    shape = [-(-(limit - start) // stride) for start, limit, stride in bounds]
    attributes = {name: like.attributes[name] for name in like.attributes}
    for name, position in (("start_indices", 0), ("limit_indices", 1), ("strides", 2)):
        attributes[name] = ir.DenseI64ArrayAttr.get([bound[position] for bound in bounds])
    result_type = ir.RankedTensorType.get(shape, ranked.element_type)
    return create_op("xhlo.slice", [value], [result_type], attributes, like.location).results[0]


# --- duplicates -------------------------------------------------------------------------------


# readers that need their operand in memory: a linalg loop nest cannot compute it inside them
MATERIALIZING_READERS = frozenset({"stablehlo.slice", "stablehlo.pad", "stablehlo.dynamic_slice"})
VIEWS = frozenset({"stablehlo.slice", "stablehlo.reshape"})


def merge_materialized_duplicates(module: ir.Module) -> int:
    """Make equal ops of a kernel (same op, operands and attributes) one where that saves work
    and memory; how many went. Fusion copies a cheap producer into every consumer it fuses
    into, and when those consumers end up in one kernel the copies are equal ops: jax's
    associative_scan (a 2048-row linear recurrence, 430 fused ops) computed each level's
    products again for each of their readers, and, since slices read them, put every copy in
    memory (27 MB of scratch; 18 MB and 5.9 -> 3.1-3.6 ms merged). A slice or reshape of a
    kernel argument is a view (free to share); any other op is shared when a slice or pad
    reads one of its copies, which is then in memory anyway, and the other copies' readers
    read it there. A value read by loop nests only stays duplicated: the linalg lowering fuses
    each copy into its reader (single-use producers only), where one shared value would be
    materialized (a layer norm's centered rows, read by the variance and by the output:
    transformer_bf16 took 264 KB of scratch under plain CSE)."""
    merged = 0
    for function in ops_named(module, "func.func"):
        changed = True
        while changed:
            changed = False
            first_of: dict = {}
            for op in list(function.regions[0].blocks[0].operations):
                op = op.operation
                if op.regions or len(op.results) != 1 or op.name == "func.return" or not op.name.startswith("stablehlo."):
                    continue
                key = (op.name, tuple(op.operands), tuple(sorted((name, str(op.attributes[name])) for name in op.attributes)), str(op.results[0].type))
                first = first_of.setdefault(key, op)
                if first is not op and shared_without_cost(first, op):
                    op.results[0].replace_all_uses_with(first.results[0])
                    op.erase()
                    merged += 1
                    changed = True
    return merged


def shared_without_cost(first: ir.Operation, duplicate: ir.Operation) -> bool:
    if first.name in VIEWS and all(isinstance(v.owner, ir.Block) or v.owner.name == "bufferization.to_tensor" for v in first.operands):
        return True
    return any(use.owner.name in MATERIALIZING_READERS for op in (first, duplicate) for use in op.results[0].uses)


# --- concatenates -------------------------------------------------------------------------


CONCATENATE_MOVED_BELOW = {"xhlo.reshape": shape.reshape_of_concatenate_as_concatenate,
                           "xhlo.transpose": shape.transpose_of_concatenate_as_concatenate}


def concatenates_moved_below(function) -> None:
    """Rewrite a reshape adding or dropping unit dimensions, or a transpose, of a concatenate
    into the concatenate of its parts reshaped or transposed (`algsimp_patterns/shape.py`'s
    rewrites, there for a concatenate no other op reads): in a kernel, fusion has copied the
    concatenate for each reader. Written to a result, each part's loop nest then writes its
    slice (`concatenation.py`), reading its operands transposed, where the concatenate went
    through scratch first (a WaveNet's gradient: both halves of a gated activation's
    gradient, 8 MiB a layer, before the weight gradient's transpose). A pad stays where it
    is: a transposed loop nest writing a padded result's interior ran 3x slower than the pad
    through scratch and the transpose tiled for the caches."""
    for op in erasure.live_ops(ops_named(function, *CONCATENATE_MOVED_BELOW)):
        concatenate = defining_op(op.operands[0])
        with ir.InsertionPoint(op), op.location:
            parts = CONCATENATE_MOVED_BELOW[op.name](op, None)
        if parts is not NO_MATCH:
            op.results[0].replace_all_uses_with(parts)
            erasure.erase(op)
            erasure.erase(concatenate)


# --- reshaped results -----------------------------------------------------------------------


def unreshaped_result(value: ir.Value, destination: ir.Value, memref_of, results: list[ir.Value]) -> tuple[ir.Value, ir.Value]:
    """(what to write, where) for kernel result `value` and its destination memref: through
    reshapes nothing else reads, the value before them and a view of the destination in its
    shape (`memref_of`: the memref type holding a tensor type). A one-operand elementwise op
    of a reshape read by nothing else (a bf16 attention's heads merged by a transpose and a
    reshape, then converted to f32 for the next dot) is computed before the reshape instead:
    the transposed value was written to scratch and copied out whole (that kernel ran at 13
    GB/s). The kernel's other `results` are read too, though not yet by an op: none of them
    is rewritten (an RNG's kernel returning a value and its reshape crashed the process)."""
    others = [result for result in results if result != value]
    if len(others) < len(results) - 1:
        return value, destination  # returned twice
    while (not any(True for _ in value.uses) and all(value != other for other in others)
           and (reshape := reshape_under(value, others)) is not None):
        value = reshape.operands[0]
        destination = reshaped_view(destination, memref_of(value.type))
        erasure.erase(reshape)
    return value, destination


def reshape_under(value: ir.Value, others: list[ir.Value]) -> ir.Operation | None:
    """The reshape defining `value`, or the reshape a one-operand elementwise op defining it
    reads alone (and no other kernel result is), which is then moved after that op (the op
    computed in the reshape's operand shape); else None."""
    op = defining_op(value)
    if op is None or op.name == "xhlo.reshape":
        return op
    if kind_of(op) not in ELEMENTWISE or len(op.operands) != 1 or len(op.results) != 1:
        return None
    reshape = defining_op(op.operands[0])
    if (reshape is None or reshape.name != "xhlo.reshape" or len(list(reshape.results[0].uses)) != 1
            or any(reshape.results[0] == other for other in others)):
        return None
    operand = reshape.operands[0]
    element = ir.RankedTensorType(value.type).element_type
    with ir.InsertionPoint(op), op.location:
        early = create_op(op.name, [operand], [ir.RankedTensorType.get(ir.RankedTensorType(operand.type).shape, element)],
                          {name: op.attributes[name] for name in op.attributes}, op.location).results[0]
        moved = create_op("xhlo.reshape", [early], [value.type], {}, reshape.location)
    value.replace_all_uses_with(moved.results[0])
    erasure.erase(op)
    erasure.erase(reshape)
    return moved


def reshaped_view(memref: ir.Value, view_type: ir.Type) -> ir.Value:
    """A row-major memref seen in another shape (its elements in the same order)."""
    shape = ir.MemRefType(view_type).shape
    strides = [1] * len(shape)
    for index in range(len(shape) - 2, -1, -1):
        strides[index] = strides[index + 1] * shape[index + 1]
    attributes = {"static_offsets": ir.DenseI64ArrayAttr.get([0]), "static_sizes": ir.DenseI64ArrayAttr.get(shape),
                  "static_strides": ir.DenseI64ArrayAttr.get(strides),
                  "operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 0, 0, 0])}
    return ir.Operation.create("memref.reinterpret_cast", results=[view_type], operands=[memref], attributes=attributes).result


# --- in place -------------------------------------------------------------------------------


def write_over_dying_operands(module: ir.Module) -> None:
    """Give each elementwise `linalg.generic` that does not read its destination an operand of
    its result type as destination, when the loop nest reads that operand element by element
    and nothing reads it after the loop nest (bufferization then writes in place)."""
    for generic in ops_named(module, "linalg.generic"):
        if len(generic.results) == 1 and elementwise_without_reading_destination(generic):
            operand = dying_operand(generic)
            if operand is not None:
                generic.operands[len(generic.operands) - 1] = operand


def elementwise_without_reading_destination(generic: ir.Operation) -> bool:
    iterators = ir.ArrayAttr(generic.attributes["iterator_types"])
    payload = generic.regions[0].blocks[0]
    destination = payload.arguments[len(payload.arguments) - 1]
    return all("parallel" in str(iterator) for iterator in iterators) and not any(True for _ in destination.uses)


def dying_operand(generic: ir.Operation) -> ir.Value | None:
    """An input computed by another loop nest, of the result's type, read here only element
    by element and read elsewhere only before this loop nest."""
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(generic.attributes["indexing_maps"])]
    identity = ir.AffineMap.get_identity(len(ir.ArrayAttr(generic.attributes["iterator_types"])))
    inputs = list(generic.operands)[:-1]
    for operand in inputs:
        producer = defining_op(operand)
        if producer is None or producer.name != "linalg.generic" or operand.type != generic.results[0].type:
            continue
        read_elementwise = all(indexing == identity for value, indexing in zip(inputs, maps) if value == operand)
        if read_elementwise and read_only_before(operand, generic):
            return operand
    return None


def read_only_before(value: ir.Value, op: ir.Operation) -> bool:
    for use in value.uses:
        reader = use.owner.operation
        if reader != op and (reader.block != op.block or not reader.is_before_in_block(op)):
            return False
    return True


# --- padded values ------------------------------------------------------------------------------


def write_padded_in_place(module: ir.Module) -> int:
    """A loop nest's result or a kernel input padded by a constant (a convolution's input)
    becomes the constant filled into the padded tensor at the function's start, the value
    inserted into its interior: empty-tensor elimination then has the loop nest write into
    that interior, and an input is copied there once, where bufferization otherwise wrote the
    pad to scratch and copied it in (the conv net's relu before its second convolution: a 128
    KiB buffer and a copy loop nest per image; a causal convolution's padded input written to
    a result, 8 x 4096 x 32: 0.76 -> 0.45 ms). How many were."""
    rewritten = 0
    for pad in ops_named(module, "tensor.pad"):
        source = pad.operands[0]
        padding = constant_padding(pad)
        if padding is None or isinstance(source.owner, ir.Block) \
                or not (source.owner.name.startswith("linalg.") or source.owner.name == "bufferization.to_tensor") \
                or pad.parent.name != "func.func":  # inside a loop the fill would be copied each time round
            continue
        padded_type = ir.RankedTensorType(pad.results[0].type)
        source_type = ir.RankedTensorType(source.type)
        if not padded_type.has_static_shape or not source_type.has_static_shape:
            continue
        low = list(ir.DenseI64ArrayAttr(pad.attributes["static_low"]))
        with ir.InsertionPoint.at_block_begin(pad.parent.regions[0].blocks[0]), pad.location:
            value = ir.Operation.create("arith.constant", results=[padding.type], attributes={"value": padding}).result
            empty = ir.Operation.create("tensor.empty", results=[padded_type], operands=[]).result
            filled = linalg.fill(value, outs=[empty])
        with ir.InsertionPoint(pad), pad.location:
            inserted = ir.Operation.create(
                "tensor.insert_slice", results=[padded_type], operands=[source, filled],
                attributes={"static_offsets": ir.DenseI64ArrayAttr.get(low),
                            "static_sizes": ir.DenseI64ArrayAttr.get(list(source_type.shape)),
                            "static_strides": ir.DenseI64ArrayAttr.get([1] * source_type.rank),
                            "operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 1, 0, 0, 0])}).result
        pad.results[0].replace_all_uses_with(inserted)
        pad.erase()
        rewritten += 1
    return rewritten


def constant_padding(pad: ir.Operation) -> ir.Attribute | None:
    """The padding value of a `tensor.pad` with static bounds yielding one constant, or None."""
    if len(pad.operands) != 1:  # dynamic low or high bounds
        return None
    body = pad.regions[0].blocks[0].operations
    yielded = body[len(body) - 1]
    if yielded.name != "tensor.yield" or isinstance(yielded.operands[0].owner, ir.Block):
        return None
    producer = yielded.operands[0].owner
    return producer.attributes["value"] if producer.name == "arith.constant" else None

