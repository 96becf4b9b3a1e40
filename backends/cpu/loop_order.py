"""Loop order for vectorization: make the innermost loop of a `linalg.generic` run along the
output's contiguous (last) dimension when every operand is contiguous or constant along it;
and let reductions reassociate their sums and products (`reassociate_reductions`).

`convert-linalg-to-loops` nests loops in the order of the generic's iteration dimensions, and
the LLVM vectorizer widens only the innermost loop. A named convolution or matmul puts its
reduction dimensions innermost: the inner loop then reduces a short channel run with strided
reads of the filter. Moved innermost, the output channel dimension streams the filter and the
output contiguously while the input element stays in a register (the `ikj` order of a
matmul), which the vectorizer turns into broadcast-multiply-add over whole vectors. A generic
whose operands would be read with a stride along that dimension (a row reduction: the rows
are the output's last dimension but the input's first) keeps its order.
"""

from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir


def contiguous_or_constant(indexing: ir.AffineMap, dimension: int) -> bool:
    """Whether an operand indexed by `indexing` moves only along its last dimension (or not at
    all) when loop `dimension` advances."""
    for position, expression in enumerate(indexing.results):
        if position == len(indexing.results) - 1:
            continue
        if uses_dimension(expression, dimension, indexing.n_dims):
            return False
    return True


def uses_dimension(expression: ir.AffineExpr, dimension: int, count: int) -> bool:
    """Whether `expression` changes when dimension `dimension` does (compose with a map that
    zeroes every other dimension and compare with zeroing all of them)."""
    zero = ir.AffineConstantExpr.get(0)
    only = ir.AffineMap.get(count, 0, [ir.AffineDimExpr.get(d) if d == dimension else zero for d in range(count)])
    none = ir.AffineMap.get(count, 0, [zero] * count)
    return str(expression.compose(only)) != str(expression.compose(none))


def innermost_candidate(generic: ir.Operation) -> int | None:
    """The loop dimension to move innermost, or None to keep the order."""
    maps = [ir.AffineMapAttr(attr).value for attr in ir.ArrayAttr(generic.attributes["indexing_maps"])]
    iterators = [str(attr) for attr in ir.ArrayAttr(generic.attributes["iterator_types"])]
    output = maps[-1]
    if len(generic.results) or not output.results:
        return None
    try:
        dimension = ir.AffineDimExpr(output.results[-1]).position
    except ValueError:  # not a plain dimension
        return None
    if dimension == len(iterators) - 1 or "parallel" not in iterators[dimension]:
        return None
    if all(contiguous_or_constant(indexing, dimension) for indexing in maps):
        return dimension
    return None


def move_innermost(generic: ir.Operation, dimension: int) -> None:
    maps = [ir.AffineMapAttr(attr).value for attr in ir.ArrayAttr(generic.attributes["indexing_maps"])]
    iterators = list(ir.ArrayAttr(generic.attributes["iterator_types"]))
    count = len(iterators)
    order = [d for d in range(count) if d != dimension] + [dimension]  # new loop p runs old dimension order[p]
    position = {old: new for new, old in enumerate(order)}
    substitution = ir.AffineMap.get(count, 0, [ir.AffineDimExpr.get(position[d]) for d in range(count)])
    new_maps = [ir.AffineMap.get(count, 0, [expression.compose(substitution) for expression in indexing.results]) for indexing in maps]
    generic.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in new_maps])
    generic.attributes["iterator_types"] = ir.ArrayAttr.get([iterators[d] for d in order])
    index_type = ir.IntegerType.get_signless(64)
    for inner in generic.regions[0].blocks[0].operations:
        if inner.operation.name == "linalg.index":
            old = ir.IntegerAttr(inner.operation.attributes["dim"]).value
            inner.operation.attributes["dim"] = ir.IntegerAttr.get(index_type, position[old])


def reassociate_reductions(generic: ir.Operation) -> None:
    """Let the vectorizer reorder the sums and products of a reduction (`fastmath<reassoc>`,
    as XLA:CPU's reductions reorder theirs): without it a float sum stays a scalar chain."""
    if not any("reduction" in str(attr) for attr in ir.ArrayAttr(generic.attributes["iterator_types"])):
        return
    for inner in generic.regions[0].blocks[0].operations:
        if inner.operation.name in ("arith.addf", "arith.subf", "arith.mulf"):  # subf: a sum of negated elements
            inner.operation.attributes["fastmath"] = ir.Attribute.parse("#arith.fastmath<reassoc>")


def reorder_loops(module: ir.Module) -> None:
    """Apply the rule to every buffer-semantics `linalg.generic` (its `linalg.index` ops
    renumbered with its loops), and let reductions reassociate."""
    for generic in ops_named(module, "linalg.generic"):
        reassociate_reductions(generic)
        dimension = innermost_candidate(generic)
        if dimension is not None:
            move_innermost(generic, dimension)
