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

Only concatenates whose result is a kernel result are rewritten: one feeding other ops only
fuses into them as the select chain and is never materialized, which the slices would force.
"""

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
            op.results[0].replace_all_uses_with(inserted_slices(op, result_type))
        erasure.erase(op)
        rewritten += 1
    return rewritten


def materialized(value: ir.Value) -> bool:
    """Whether `value` is written to a kernel result."""
    return any(use.owner.name == "bufferization.materialize_in_destination" and use.operand_number == 0
               for use in value.uses)


def inserted_slices(op: ir.Operation, result_type: ir.RankedTensorType) -> ir.Value:
    """The operands of concatenate `op` inserted one after another along its dimension into
    an empty tensor of `result_type`."""
    dimension = ir.IntegerAttr(op.attributes["dimension"]).value
    value = ir.Operation.create("tensor.empty", results=[result_type]).results[0]
    offset = 0
    for operand in op.operands:
        shape = ir.RankedTensorType(operand.type).shape
        offsets = [offset if axis == dimension else 0 for axis in range(len(shape))]
        value = ir.Operation.create(
            "tensor.insert_slice", results=[result_type], operands=[operand, value],
            attributes={"static_offsets": ir.DenseI64ArrayAttr.get(offsets),
                        "static_sizes": ir.DenseI64ArrayAttr.get(shape),
                        "static_strides": ir.DenseI64ArrayAttr.get([1] * len(shape)),
                        "operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 1, 0, 0, 0])}).results[0]
        offset += shape[dimension]
    return value
