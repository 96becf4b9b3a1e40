"""A gather computes the elements it reads of an elementwise producer, not the producer.

`stablehlo-legalize-to-linalg` lowers a gather to a loop nest that reads its operand
through `tensor.extract` at computed indices, and linalg's elementwise fusion does not fuse
a producer into such a read: the producer stays a loop nest of its own over its whole shape,
materialized in scratch, from which the gather picks a few elements. A cross-entropy loss
is the case that matters: the log-softmax of 4096 x 1024 logits was computed and stored (16
MiB of scratch) to read one element a row, the label's. XLA's elemental emitter computes a
fused producer at the indices its consumer asks for; here each such `tensor.extract` of a
`linalg.generic` becomes the generic's body at the extracted indices (its inputs extracted
where its indexing maps put them, `linalg.index` the extracted index), and a generic left
without readers is erased.

Taken: a generic of one result, all dimensions parallel, its result indexed by the loop
dimensions in order, its body elementwise work (arith, math, complex, reads of other tensors
and of its indices) that does not read its initial value, its inputs indexed by dimensions
or constants (broadcasts, transposes). Recomputing must not cost more than the producer:
the reads (each extract of the producer once per iteration of the loop nest around it)
number at most the producer's elements. Run to a fixed point, so that a producer of a
producer is taken too.
"""

import math

from mlirxla.ir_queries import nested_ops, ops_named
from mlirxla.mlir import arith, ir, tensor
from mlirxla.transforms.fusion_graph import clone_into

ELEMENTWISE_DIALECTS = {"arith", "math", "complex"}
BODY_OPS = {"tensor.extract", "linalg.index", "linalg.yield"}


def compute_gathered_elements(module: ir.Module) -> int:
    """Rewrite every qualifying extract of `module`; how many were rewritten."""
    rewritten = 0
    while True:
        extracts = [op for op in ops_named(module, "tensor.extract") if producer_to_inline(op) is not None]
        if not extracts:
            return rewritten
        for extract in extracts:
            producer = producer_to_inline(extract)  # an earlier rewrite may have changed it
            if producer is None:
                continue
            inline_at(extract, producer)
            rewritten += 1
            if not list(producer.results[0].uses):
                producer.erase()


def producer_to_inline(extract: ir.Operation) -> ir.Operation | None:
    """The generic whose body `extract` may compute in its place, or None."""
    owner = extract.operands[0].owner
    if not isinstance(owner, ir.OpView) or owner.operation.name != "linalg.generic":
        return None
    producer = owner.operation
    if not elementwise(producer):
        return None
    elements = math.prod(ir.RankedTensorType(producer.results[0].type).shape)
    return producer if reads_of(producer, extract) <= elements else None


def elementwise(generic: ir.Operation) -> bool:
    if len(generic.results) != 1 or not ir.RankedTensorType(generic.results[0].type).has_static_shape:
        return False
    if any("parallel" not in str(kind) for kind in ir.ArrayAttr(generic.attributes["iterator_types"])):
        return False
    maps = indexing_maps(generic)
    rank = ir.RankedTensorType(generic.results[0].type).rank
    if [getattr(e, "position", None) for e in maps[-1].results] != list(range(rank)) or maps[-1].n_dims != rank:
        return False
    if any(not all(isinstance(e, (ir.AffineDimExpr, ir.AffineConstantExpr)) for e in m.results) for m in maps[:-1]):
        return False
    body = generic.regions[0].blocks[0]
    if list(body.arguments[-1].uses):
        return False
    return all(op.operation.name in BODY_OPS or (op.operation.name.split(".")[0] in ELEMENTWISE_DIALECTS
                                                 and not len(op.operation.regions))
               for op in body.operations)


def indexing_maps(generic: ir.Operation) -> list[ir.AffineMap]:
    return [ir.AffineMapAttr(attribute).value for attribute in ir.ArrayAttr(generic.attributes["indexing_maps"])]


def reads_of(producer: ir.Operation, extract: ir.Operation) -> int:
    """How many elements of `producer` the loop nest around `extract` reads through extracts
    of it (all of them, once per iteration); 1 for an extract in no loop nest."""
    consumer = enclosing_generic(extract)
    if consumer is None:
        return 1
    extracts = sum(1 for op in nested_ops(consumer) if op.name == "tensor.extract" and op.operands[0] == producer.results[0])
    return extracts * iterations(consumer)


def enclosing_generic(op: ir.Operation) -> ir.Operation | None:
    parent = op.parent
    while parent is not None and parent.name != "func.func":
        if parent.name == "linalg.generic":
            return parent
        parent = parent.parent
    return None


def iterations(generic: ir.Operation) -> int:
    """The loop nest's trip count: each dimension's size from an operand it indexes."""
    sizes = {}
    for operand, affine_map in zip(generic.operands, indexing_maps(generic)):
        if isinstance(operand.type, ir.RankedTensorType):
            for expression, size in zip(affine_map.results, ir.RankedTensorType(operand.type).shape):
                if isinstance(expression, ir.AffineDimExpr):
                    sizes[expression.position] = size
    return math.prod(sizes.values())


def inline_at(extract: ir.Operation, producer: ir.Operation) -> None:
    """Replace `extract` with `producer`'s body computed at its indices."""
    indices = list(extract.operands)[1:]
    body = producer.regions[0].blocks[0]
    inputs = len(producer.operands) - 1
    with ir.InsertionPoint(extract), extract.location:
        mapping = {}
        for argument, operand, affine_map in zip(list(body.arguments)[:inputs], list(producer.operands)[:inputs],
                                                 indexing_maps(producer)):
            if not isinstance(operand.type, ir.RankedTensorType):
                mapping[argument] = operand
                continue
            at = [indices[e.position] if isinstance(e, ir.AffineDimExpr) else arith.ConstantOp(ir.IndexType.get(), e.value).result
                  for e in affine_map.results]
            mapping[argument] = tensor.ExtractOp(operand, at).result
        for op in list(body.operations):
            op = op.operation
            if op.name == "linalg.yield":
                extract.results[0].replace_all_uses_with(mapping.get(op.operands[0], op.operands[0]))
                break
            if op.name == "linalg.index":
                mapping[op.results[0]] = indices[ir.IntegerAttr(op.attributes["dim"]).value]
                continue
            clone_into(op, mapping)
    extract.erase()
