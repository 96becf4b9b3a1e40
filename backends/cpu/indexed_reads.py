"""A loop nest's read of a tensor at its own loop indices becomes an input of the nest.

`stablehlo-legalize-to-linalg` lowers a gather to a `linalg.generic` with no inputs whose
body reads everything through `tensor.extract`, its start indices included, at
`linalg.index` positions. linalg's elementwise fusion then cannot fuse it into a reduction
that reads it: the fused nest would lose the size of the reduced dimension, which only an
input indexed by it can give. A bag of embeddings (ids gathered from a table, summed over
the bag) materialized its [batch, bag, width] rows, 8 MiB, to sum them. Made an input with
the affine map of those indices, the start indices define the bag dimension's size, the
gather fuses into its reduction, and the index arithmetic before it (a negative id wrapped)
fuses into the gather. XLA's elemental emitter computes a gather inside its consumer's loop
the same way.

Taken: `tensor.extract` ops directly in a generic's body, of a tensor defined outside the
generic, each index a `linalg.index` of the generic or a constant. Run between the
StableHLO-to-linalg conversion and elementwise fusion.
"""

from mlirxla.ir_queries import is_inside, ops_named
from mlirxla.mlir import ir


def reads_as_inputs(module: ir.Module) -> int:
    """Rewrite every generic of `module` with such reads; how many reads became inputs."""
    return sum(rewrite(generic) for generic in ops_named(module, "linalg.generic"))


def rewrite(generic: ir.Operation) -> int:
    body = generic.regions[0].blocks[0]
    rank = len(ir.ArrayAttr(generic.attributes["iterator_types"]))
    reads = [(op.operation, index_map(op.operation, generic, rank)) for op in body.operations if op.operation.name == "tensor.extract"]
    reads = [(op, affine_map) for op, affine_map in reads if affine_map is not None]
    if not reads:
        return 0
    added: list[tuple[ir.Value, ir.AffineMap]] = []
    for op, affine_map in reads:
        if (op.operands[0], affine_map) not in added:
            added.append((op.operands[0], affine_map))
    inputs_count = int(ir.DenseI32ArrayAttr(generic.attributes["operandSegmentSizes"])[0])
    operands = list(generic.operands)
    maps = [ir.AffineMapAttr(attribute).value for attribute in ir.ArrayAttr(generic.attributes["indexing_maps"])]
    inputs = operands[:inputs_count] + [value for value, _ in added]
    outputs = operands[inputs_count:]
    all_maps = maps[:inputs_count] + [affine_map for _, affine_map in added] + maps[inputs_count:]
    with ir.InsertionPoint(generic), generic.location:
        replacement = ir.Operation.create(
            "linalg.generic", results=[result.type for result in generic.results], operands=inputs + outputs, regions=1,
            attributes={"indexing_maps": ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in all_maps]),
                        "iterator_types": generic.attributes["iterator_types"],
                        "operandSegmentSizes": ir.DenseI32ArrayAttr.get([len(inputs), len(outputs)])})
    old_arguments = list(body.arguments)
    new_types = [ir.RankedTensorType(value.type).element_type for value, _ in added]
    block = replacement.regions[0].blocks.append(*[a.type for a in old_arguments[:inputs_count]], *new_types,
                                                 *[a.type for a in old_arguments[inputs_count:]])
    new_arguments = list(block.arguments)
    kept = new_arguments[:inputs_count] + new_arguments[inputs_count + len(added):]
    for old, new in zip(old_arguments, kept):
        old.replace_all_uses_with(new)
    for op, affine_map in reads:
        op.results[0].replace_all_uses_with(new_arguments[inputs_count + added.index((op.operands[0], affine_map))])
        op.erase()
    for op in list(body.operations):
        block.append(op.operation)
    for old, new in zip(generic.results, replacement.results):
        old.replace_all_uses_with(new)
    generic.erase()
    return len(reads)


def index_map(extract: ir.Operation, generic: ir.Operation, rank: int) -> ir.AffineMap | None:
    """The affine map of `extract`'s indices in the generic's loop dimensions, or None when
    it reads elsewhere or a tensor the generic defines."""
    source = extract.operands[0]
    if not isinstance(source.type, ir.RankedTensorType) or not ir.RankedTensorType(source.type).has_static_shape:
        return None
    owner = source.owner
    if not isinstance(owner, ir.OpView) or is_inside(owner.operation, generic):
        return None
    expressions = []
    for index in list(extract.operands)[1:]:
        producer = index.owner
        if not isinstance(producer, ir.OpView):
            return None
        producer = producer.operation
        if producer.name == "linalg.index" and producer.parent.operation == generic.operation:
            expressions.append(ir.AffineDimExpr.get(ir.IntegerAttr(producer.attributes["dim"]).value))
        elif producer.name == "arith.constant":
            expressions.append(ir.AffineConstantExpr.get(ir.IntegerAttr(producer.attributes["value"]).value))
        else:
            return None
    return ir.AffineMap.get(rank, 0, expressions)
