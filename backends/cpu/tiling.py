"""Cache blocking for kernels that read an operand across their innermost loop: transposes,
and elementwise work on a transposed operand.

After `loop_order.py` the innermost loop runs along the output's contiguous dimension; an
operand laid out the other way is then read with a stride of a whole row per iteration, and
each cache line it brings in serves one element before it is evicted. Tiling the innermost
loop and the loop along which that operand is contiguous into TILE x TILE blocks
(`transform.structured.tile_using_for`, upstream's transform dialect) makes every line
brought in serve a whole tile row: a 2048x2048 f32 transpose-add ran 3x faster, a 256x256
one 1.4x. Only all-parallel generics are tiled (a reduction keeps its loop order), and only
when both loops span at least two tiles.

Left to LLVM, such a tile still moved one element at a time: its loop vectorizer widened the
loop along the transposed operand's rows and stored with 16-lane scatters (a 1024x1024 f32
transpose at 2 GB/s, a tenth of the machine's copy bandwidth). A tile of an elementwise body
(arith ops and reads of the indices, or a plain copy) on 8- to 64-bit elements is
therefore vectorized here: its two loops are tiled again into VECTOR x VECTOR blocks
(other loops into 1s), each block
read as VECTOR rows of VECTOR contiguous elements, transposed in registers
(`vector.transpose` lowered to one flat shuffle, which LLVM's x86 backend turns into
unpacks and permutes; upstream's AVX2 sequence emits inline assembly, which llvmlite's
object emission cannot assemble) and written as VECTOR contiguous rows. The reads'
permutations are lowered before their unit dimensions are dropped: a block between unit block
dimensions (1x8x1x8 of the operand of a [0, 2, 3, 1] transpose, jax's attention heads) read
as 8x8 through the map (d3, d1) is no permutation of the minor dimensions, which upstream's
lowering needs, and was read element by element. Loops whose extent
is not a multiple of VECTOR are split first (`transform.structured.split`): the multiple
gets the vector blocks, the remaining strip (fewer than VECTOR rows or columns) keeps the
plain loops. Such a nest is vectorized from two vector blocks along each loop (16 elements)
on.

The vector tile's shape follows the caches at power-of-two strides. Along the innermost loop
it spans one cache line of the result (16 f32 elements, at least one vector block), so
the result's lines are each written whole within two consecutive blocks; along the
transposed operand's rows it spans ALONG_TILES (64 elements: 256 contiguous bytes of each
operand row per visit, a quarter of the page-table walks of 16 elements). A square 32x32
tile kept 32 operand rows and 16 half-written result lines live between the two halves of
each line; at a 16 KiB row stride they all fall in one 8-way L1 set and were evicted
(interleaved, one thread, best of 60 calls: 2048x2048 f32 8.9 -> 12.9 GB/s, 4096x1024 8.5
-> 14.7, 1024x4096 6.4 -> 12.3, 4096x4096 3.8 -> 7.2, 1024x1024 15 -> 17). Each size is the
largest of its candidates dividing what the vector blocks cover, so every block has static
sizes.

An operand read backwards (a reverse fused with the transpose: `jnp.rot90`) cannot be tiled:
upstream's tiling sizes its slice by its index at a tile's first and last iteration, one
element. Before bufferization such an operand is reversed by a loop nest of its own into
scratch (contiguous, vectorized by LLVM) and read forwards (`reversed_reads_apart`): a
1024 x 1024 rotation 5.3 -> 2.0 ms (XLA:CPU 3.0), 2048 x 2048 22 -> 9.8 (XLA 20).
"""

from dataclasses import dataclass

from mlirxla.errors import MlirxlaError
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir
from torch_mlir.dialects.transform import interpreter

from .loop_order import contiguous_or_constant

TILE = 32
VECTOR = 8
CACHE_LINE_BYTES = 64
ALONG_TILES = (64, 32, 16, 8)  # along the transposed operand's contiguous rows
VECTOR_ELEMENT_BITS = (8, 16, 32, 64)  # not i1: a vector of i1 packs bits, memory holds bytes
MARK = "mlirxla.tile"
SCRIPT = """module attributes {{transform.with_named_sequence}} {{
  transform.named_sequence @__transform_main(%root: !transform.any_op {{transform.readonly}}) {{
    %generic = transform.structured.match ops{{["linalg.generic"]}} attributes {{{mark}}} in %root : (!transform.any_op) -> !transform.any_op
    %tiled, %loops:{count} = transform.structured.tile_using_for %generic tile_sizes [{sizes}] : (!transform.any_op) -> (!transform.any_op{loop_types})
    transform.yield
  }}
}}"""
HEADER = """module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
"""
FOOTER = """    transform.yield
  }
}"""
SPLIT = """    %parts{index} = transform.structured.split %main{index} after {at} {{dimension = {dimension}}} : !transform.any_op
    %main{next}, %strip{index} = transform.split_handle %parts{index} : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
"""
KEEP = """    %main{next} = transform.merge_handles %main{index} : !transform.any_op
"""
TILE_AND_VECTORIZE = """    %cached, %cache_loops:{cache_count} = transform.structured.tile_using_for %main2 tile_sizes [{cache_sizes}] : (!transform.any_op) -> (!transform.any_op{cache_types})
    %block, %block_loops:{block_count} = transform.structured.tile_using_for %cached tile_sizes [{block_sizes}] : (!transform.any_op) -> (!transform.any_op{block_types})
    transform.structured.vectorize %block : !transform.any_op
    %function = transform.structured.match ops{{["func.func"]}} in %root : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %function {{
      transform.apply_patterns.vector.transfer_permutation_patterns
    }} : !transform.any_op
    transform.apply_patterns to %function {{
      transform.apply_patterns.vector.cast_away_vector_leading_one_dim
      transform.apply_patterns.vector.drop_unit_dims_with_shape_cast
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.canonicalization
    }} : !transform.any_op
    transform.apply_patterns to %function {{
      transform.apply_patterns.vector.lower_transpose lowering_strategy = "shuffle_1d"
      transform.apply_patterns.vector.lower_shape_cast
      transform.apply_patterns.canonicalization
    }} : !transform.any_op
"""


@dataclass(frozen=True)
class Blocking:
    """How a generic is blocked: the cache tile of every loop (0: not tiled), every loop's
    extent, and whether the tiles are vectorized."""

    sizes: list[int]
    extents: list[int]
    vectorized: bool = False


def loop_extents(generic: ir.Operation, maps: list[ir.AffineMap]) -> dict[int, int]:
    """Each loop's trip count, read off the operands indexed by it directly."""
    extents = {}
    for operand, indexing in zip(generic.operands, maps):
        shape = ir.MemRefType(operand.type).shape if isinstance(operand.type, ir.MemRefType) else []
        for position, expression in enumerate(indexing.results):
            if position < len(shape) and isinstance(expression, ir.AffineDimExpr):
                extents[ir.AffineDimExpr(expression).position] = shape[position]
    return extents


def transposed_loops(generic: ir.Operation) -> tuple[int, int, dict[int, int]] | None:
    """(the loop an operand read across the innermost loop is contiguous along, the
    innermost loop, every loop's extent) of an all-parallel generic, or None."""
    maps = [ir.AffineMapAttr(attr).value for attr in ir.ArrayAttr(generic.attributes["indexing_maps"])]
    iterators = [str(attr) for attr in ir.ArrayAttr(generic.attributes["iterator_types"])]
    count = len(iterators)
    if count < 2 or any("parallel" not in iterator for iterator in iterators):
        return None
    innermost = count - 1
    extents = loop_extents(generic, maps)
    for indexing in maps[:-1]:
        if contiguous_or_constant(indexing, innermost) or not indexing.results:
            continue
        last = indexing.results[-1]
        if not isinstance(last, ir.AffineDimExpr):
            continue
        along = ir.AffineDimExpr(last).position
        if along != innermost:
            return along, innermost, extents
    return None


def decreasing(expression: ir.AffineExpr) -> bool:
    """Whether an index expression runs backwards along some loop (a reverse: `-d0 + 2`)."""
    if isinstance(expression, ir.AffineMulExpr):
        factors = (expression.lhs, expression.rhs)
        if any(isinstance(factor, ir.AffineConstantExpr) and factor.value < 0 for factor in factors):
            return True
    if isinstance(expression, (ir.AffineAddExpr, ir.AffineMulExpr)):
        return decreasing(expression.lhs) or decreasing(expression.rhs)
    return False


def blocking(generic: ir.Operation) -> Blocking | None:
    """The blocking of `generic`, or None when it needs none or cannot have one: upstream's
    tiling sizes an operand's slice by its index at a tile's first and last iteration, which
    gives a dimension read backwards (a transposed reverse) one element, and the tiled
    generic no longer verifies."""
    maps = [ir.AffineMapAttr(attr).value for attr in ir.ArrayAttr(generic.attributes["indexing_maps"])]
    if any(decreasing(expression) for indexing in maps for expression in indexing.results):
        return None
    found = transposed_loops(generic)
    if found is None:
        return None
    along, innermost, extents = found
    count = len(ir.ArrayAttr(generic.attributes["iterator_types"]))
    every = [extents.get(loop, 0) for loop in range(count)]
    if vectorizable(generic) and min(every[along], every[innermost]) >= 2 * VECTOR:
        sizes = [0] * count
        sizes[along] = dividing(ALONG_TILES, every[along])
        sizes[innermost] = dividing(line_tiles(generic), every[innermost])
        return Blocking(sizes, every, vectorized=True)
    if min(every[along], every[innermost]) >= 2 * TILE:
        return Blocking([TILE if loop in (along, innermost) else 0 for loop in range(count)], every)
    return None


def line_tiles(generic: ir.Operation) -> tuple[int, ...]:
    """The tiles along the innermost loop, largest first: one cache line of the result's
    elements, down to one vector block."""
    element = ir.MemRefType(generic.operands[-1].type).element_type
    line = max(CACHE_LINE_BYTES * 8 // element.width, VECTOR)
    return tuple(tile for tile in (line, line // 2, line // 4, line // 8) if tile >= VECTOR)


def dividing(tiles: tuple[int, ...], extent: int) -> int:
    """The largest of `tiles` dividing what the vector blocks cover of `extent`."""
    return next(tile for tile in tiles if vector_covered(extent) % tile == 0)


def vector_covered(extent: int) -> int:
    """What the vector blocks cover of a loop of `extent`: the largest multiple of VECTOR."""
    return extent - extent % VECTOR


def vectorizable(generic: ir.Operation) -> bool:
    """Whether the vector blocks can compute `generic`: static memrefs of 8- to 64-bit
    elements, each indexed by a projected permutation, and a body of arith ops and reads of
    the indices (an eye added before a transpose: upstream's vectorizer makes them vectors
    of indices; bf16 and f16 arithmetic is emulated in f32 later, so only their plain copies
    qualify)."""
    maps = [ir.AffineMapAttr(attr).value for attr in ir.ArrayAttr(generic.attributes["indexing_maps"])]
    if not all(indexing.is_projected_permutation for indexing in maps):
        return False
    narrow = False
    for operand in generic.operands:
        if not isinstance(operand.type, ir.MemRefType) or not ir.MemRefType(operand.type).has_static_shape:
            return False
        element = ir.MemRefType(operand.type).element_type
        width = element.width if isinstance(element, (ir.IntegerType, ir.FloatType)) else 0
        if width not in VECTOR_ELEMENT_BITS:
            return False
        narrow |= isinstance(element, ir.FloatType) and width == 16
    body = [inner.operation.name for inner in generic.regions[0].blocks[0].operations]
    if narrow:
        return body == ["linalg.yield"]
    return all(name.startswith("arith.") or name == "linalg.index" for name in body[:-1])


def vector_script(blocking_: Blocking) -> str:
    """The transform script splitting, tiling and vectorizing the marked generic."""
    lines = [HEADER, f'    %main0 = transform.structured.match ops{{["linalg.generic"]}} attributes {{{MARK}}} in %root : (!transform.any_op) -> !transform.any_op\n']
    tiled = [loop for loop, size in enumerate(blocking_.sizes) if size]
    for index, loop in enumerate(tiled):
        covered = vector_covered(blocking_.extents[loop])
        template = SPLIT if covered < blocking_.extents[loop] else KEEP
        lines.append(template.format(index=index, next=index + 1, at=covered, dimension=loop))
    block = [VECTOR if size else 1 for size in blocking_.sizes]
    lines.append(TILE_AND_VECTORIZE.format(
        cache_count=len(tiled), cache_sizes=", ".join(map(str, blocking_.sizes)), cache_types=", !transform.any_op" * len(tiled),
        block_count=len(block), block_sizes=", ".join(map(str, block)), block_types=", !transform.any_op" * len(block)))
    lines.append(FOOTER)
    return "".join(lines)


def tile_transposing_loops(module: ir.Module) -> int:
    """Block every generic of `module` that reads an operand across its innermost loop (and
    vectorize the blocks where it can); how many were blocked."""
    tiled = 0
    for generic in ops_named(module, "linalg.generic"):
        found = blocking(generic)
        if found is None:
            continue
        generic.attributes[MARK] = ir.UnitAttr.get()
        if found.vectorized:
            apply_transform(module, vector_script(found))
        else:
            loops = sum(1 for size in found.sizes if size)
            apply_transform(module, SCRIPT.format(mark=MARK, count=loops, sizes=", ".join(map(str, found.sizes)),
                                                  loop_types=", !transform.any_op" * loops))
        for inner in ops_named(module, "linalg.generic"):
            if MARK in inner.attributes:
                del inner.attributes[MARK]
        tiled += 1
    return tiled


def reversed_position(expression: ir.AffineExpr) -> tuple[int, int] | None:
    """(k, c) when `expression` is c - d_k (a reverse's index: `-d0 + 511`), else None."""
    if not isinstance(expression, ir.AffineAddExpr):
        return None
    product, constant = ir.AffineAddExpr(expression).lhs, ir.AffineAddExpr(expression).rhs
    if not isinstance(product, ir.AffineMulExpr) or not isinstance(constant, ir.AffineConstantExpr):
        return None
    dimension, factor = ir.AffineMulExpr(product).lhs, ir.AffineMulExpr(product).rhs
    if not isinstance(dimension, ir.AffineDimExpr) or not isinstance(factor, ir.AffineConstantExpr) or ir.AffineConstantExpr(factor).value != -1:
        return None
    return ir.AffineDimExpr(dimension).position, ir.AffineConstantExpr(constant).value


def forward_read(indexing: ir.AffineMap, shape: list[int]) -> ir.AffineMap | None:
    """`indexing` reading the operand reversed along each dimension it reads backwards
    (position p at c - d_k becomes d_k + (shape[p] - 1 - c)), when it has such a dimension
    and otherwise reads plain loop indices; else None."""
    results, reversed_any = [], False
    for position, expression in enumerate(indexing.results):
        found = reversed_position(expression)
        if found is None:
            if not isinstance(expression, ir.AffineDimExpr):
                return None
            results.append(expression)
            continue
        loop, constant = found
        shift = shape[position] - 1 - constant
        results.append(ir.AffineDimExpr.get(loop) + shift if shift else ir.AffineDimExpr.get(loop))
        reversed_any = True
    return ir.AffineMap.get(indexing.n_dims, indexing.n_symbols, results) if reversed_any else None


def reversed_copy(source: ir.Value, positions: list[int]) -> ir.Value:
    """`source` reversed along `positions`, a new tensor (a loop nest of its own)."""
    shaped = ir.RankedTensorType(source.type)
    empty = ir.Operation.create("tensor.empty", results=[source.type]).result
    rank = shaped.rank
    reading = [ir.AffineDimExpr.get(d) * -1 + (shaped.shape[d] - 1) if d in positions else ir.AffineDimExpr.get(d) for d in range(rank)]
    generic = ir.Operation.create(
        "linalg.generic", results=[source.type], operands=[source, empty], regions=1,
        attributes={"indexing_maps": ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get(rank, 0, reading)),
                                                       ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))]),
                    "iterator_types": ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<parallel>")] * rank),
                    "operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 1])})
    block = generic.regions[0].blocks.append(shaped.element_type, shaped.element_type)
    with ir.InsertionPoint(block):
        ir.Operation.create("linalg.yield", operands=[block.arguments[0]])
    return generic.result


def reversed_reads_apart(module: ir.Module) -> int:
    """Give every all-parallel generic on tensors that reads an operand backwards and across
    its innermost loop (`jnp.rot90`: a transposed reverse) that operand reversed by a loop
    nest of its own, read forwards; how many operands. The blocking cannot tile a backwards
    read (`blocking`), and the whole 1024 x 1024 rotation ran element by element, 10x the
    time of a transpose; reversed first, the read is a transpose the blocking takes."""
    separated = 0
    for generic in ops_named(module, "linalg.generic"):
        if not generic.results:
            continue
        iterators = [str(attr) for attr in ir.ArrayAttr(generic.attributes["iterator_types"])]
        if len(iterators) < 2 or any("parallel" not in iterator for iterator in iterators):
            continue
        maps = [ir.AffineMapAttr(attr).value for attr in ir.ArrayAttr(generic.attributes["indexing_maps"])]
        inputs = list(ir.DenseI32ArrayAttr(generic.attributes["operandSegmentSizes"]))[0]
        for index in range(inputs):
            operand = generic.operands[index]
            if not isinstance(operand.type, ir.RankedTensorType):
                continue
            shape = ir.RankedTensorType(operand.type).shape
            forward = forward_read(maps[index], shape)
            if forward is None or not forward.results or forward.results[-1] == ir.AffineDimExpr.get(len(iterators) - 1):
                continue
            if min(shape[-1], ir.RankedTensorType(generic.results[0].type).shape[-1]) < 2 * VECTOR:
                continue
            positions = [p for p, expression in enumerate(maps[index].results) if reversed_position(expression) is not None]
            with ir.InsertionPoint(generic), generic.location:
                generic.operands[index] = reversed_copy(operand, positions)
            maps[index] = forward
            generic.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps])
            separated += 1
    return separated


def has_vectors(module: ir.Module) -> bool:
    """Whether the vector blocks made vector ops in `module` (then it lowers through the
    vector dialect's conversions)."""
    return bool(ops_named(module, "vector.transfer_read", "vector.load", "vector.transfer_write", "vector.store"))


def apply_transform(module: ir.Module, script_text: str) -> None:
    """Run the transform script's `@__transform_main` on `module`; a failure is one line."""
    script = ir.Module.parse(script_text)
    try:
        interpreter.apply_named_sequence(module.operation, script.body.operations[0], script)
    except ValueError as error:
        raise MlirxlaError(f"a transform script failed on a kernel: {' '.join(str(error).split())}") from None
