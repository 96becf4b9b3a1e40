"""Register tiling for the convolutions a kernel computes as loops.

A convolution left to the generic loop lowering (one inside a batch-slice fusion, where no
GEMM runs) becomes seven nested loops with a multiply-add on memory in the innermost: every
multiply-add loads and stores the output element, and the vectorizer widens at most the
innermost loop. On two AVX2 cores the conv net's two convolutions ran at 13 GFLOP/s this
way, a fifteenth of the machine's GEMM rate.

Here each `linalg.conv_2d_nhwc_hwcf` on tensors becomes the direct convolution's micro-kernel
that IREE's and XLA's CPU code generators use (upstream's transform dialect, as `tiling.py`):
the output is tiled into blocks of `width` output columns by `features` output channels
(1 image, 1 output row; the filter rows, columns and input channels as loops of 1), each
block a 1-D convolution (`decompose`) that `vectorize` turns into outer products of a
vector of `width` input values by a vector of `features` filter values; the block's
accumulator (`width` x `features` values: 4 x 16 f32 is 8 AVX2 registers) is hoisted out of
the three reduction loops, so it lives in registers across them and is loaded and stored
once per block. Canonicalization after the hoisting drops the slices the hoisting leaves
threaded through the reduction loops unchanged: bufferization would copy each block into
scratch and back around them (four copy loop nests per block). After bufferization,
`lower_vectors` turns the contractions into outer products and those into vector FMAs.

Tile sizes: `features` is 16 or 8 (two vectors or one of 8 f32), `width` 4, 2 or 1, the
largest that divides the output's extent (a partial block would need masked vectors); a
convolution whose output channels divide by neither, or whose elements are not f32, keeps
the generic loops.
"""

from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir

from .tiling import apply_transform

MARK = "mlirxla.register_tiled"
FEATURE_TILES = (16, 8)
WIDTH_TILES = (4, 2, 1)
HEADER = """module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
"""
FOOTER = """    transform.yield
  }
}"""
TILE_AND_VECTORIZE = HEADER + """
    %conv = transform.structured.match ops{["linalg.conv_2d_nhwc_hwcf"]} attributes {MARK} in %root : (!transform.any_op) -> !transform.any_op
    %tiled, %loops:7 = transform.structured.tile_using_for %conv tile_sizes [1, 1, WIDTH, FEATURES, 1, 1, 1] : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)
    %one_dimensional = transform.structured.decompose %tiled : (!transform.any_op) -> !transform.any_op
    transform.structured.vectorize %one_dimensional : !transform.any_op
    %function = transform.structured.match ops{["func.func"]} in %root : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %function {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.loop.hoist_loop_invariant_subsets %loops#6 : !transform.any_op
    transform.loop.hoist_loop_invariant_subsets %loops#5 : !transform.any_op
    transform.loop.hoist_loop_invariant_subsets %loops#4 : !transform.any_op
    transform.apply_patterns to %function {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
""" + FOOTER
LOWER_VECTORS = HEADER + """
    %function = transform.structured.match ops{["func.func"]} in %root : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %function {
      transform.apply_patterns.vector.lower_contraction lowering_strategy = "outerproduct"
      transform.apply_patterns.vector.lower_outerproduct
      transform.apply_patterns.canonicalization
    } : !transform.any_op
""" + FOOTER


def tile_sizes(convolution: ir.Operation) -> tuple[int, int] | None:
    """(width, features) of the register block for `convolution`, or None to leave it."""
    if any(str(ir.ShapedType(operand.type).element_type) != "f32" for operand in convolution.operands):
        return None
    _, _, width, features = ir.ShapedType(convolution.results[0].type).shape
    feature_tile = next((tile for tile in FEATURE_TILES if features % tile == 0), None)
    if feature_tile is None:
        return None
    return next(tile for tile in WIDTH_TILES if width % tile == 0), feature_tile


def tile_convolutions(module: ir.Module) -> int:
    """Register-tile and vectorize every f32 `linalg.conv_2d_nhwc_hwcf` of `module` (linalg
    on tensors); how many were."""
    tiled = 0
    for convolution in ops_named(module, "linalg.conv_2d_nhwc_hwcf"):
        sizes = tile_sizes(convolution)
        if sizes is None:
            continue
        convolution.attributes[MARK] = ir.UnitAttr.get()
        width, features = sizes
        apply_transform(module, TILE_AND_VECTORIZE.replace("MARK", MARK).replace("WIDTH", str(width)).replace("FEATURES", str(features)))
        tiled += 1
    return tiled


def lower_vectors(module: ir.Module) -> None:
    """The tiled convolutions' contractions as outer products, then vector FMAs (after
    bufferization, which keeps the hoisted accumulators in registers)."""
    apply_transform(module, LOWER_VECTORS)
