"""xhlo-convolution-layout: a convolution in another layout than NHWC x HWIO -> NHWC (NCHW,
OIHW, the swapped batch and feature dimensions of a gradient) becomes that canonical
convolution between transposes, when the convolution cost model says the transposes pay
for themselves (XLA:CPU's ConvCanonicalization does the same before its library
convolutions).

The CPU backend runs only NHWC x HWIO -> NHWC convolutions as GEMMs (`convolution_strategy`'s
`gemm` and `im2col_gemm`); any other layout is generated loops, which run an NCHW layer at a
quarter of their NHWC speed (the innermost loop walks output positions, reading the input at
a window offset). The model estimates `transposed_gemm`, the canonical convolution's best
GEMM plus moving input, kernel and output through transposes, against the loop nest in the
layout as it is, and the rewrite happens when the transposed GEMM is estimated faster:

    transpose(x, [batch, spatial..., feature]), transpose(k, [spatial..., in, out])
      -> convolution NHWC x HWIO -> NHWC -> transpose back to the original output layout

Window attributes (strides, padding, dilations, reversal) follow the spatial dimensions in
their order, which the transposes keep, so they stay as they are; a convolution carrying a
sharding (for its own layout) is kept. Runs before layout
assignment, so the new transposes get layouts like any other op, and before fusion, so they
fuse with their neighbours. Every choice, made or not, is in
`convolution-layout-decisions.txt` with the estimates (written when the module has a
convolution that is not NHWC). Changed: any convolution rewritten.
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.dialects.xhlo.builder import create_op, transposed
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir

from . import convolution_strategy as strategy
from .pass_base import ModulePass, PassResult, TextReport
from .priority_fusion import describe
from .sharding_remover import SHARDING


def _i64(value: int) -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)


def canonical_numbers() -> ir.Attribute:
    def spatial(values):
        return ir.DenseI64ArrayAttr.get(list(values))

    return ir.DictAttr.get({
        "input_batch_dimension": _i64(0), "input_feature_dimension": _i64(3), "input_spatial_dimensions": spatial([1, 2]),
        "kernel_input_feature_dimension": _i64(2), "kernel_output_feature_dimension": _i64(3), "kernel_spatial_dimensions": spatial([0, 1]),
        "output_batch_dimension": _i64(0), "output_feature_dimension": _i64(3), "output_spatial_dimensions": spatial([1, 2]),
    })


def canonicalize(op: ir.Operation) -> None:
    """Replace `op` by the NHWC x HWIO -> NHWC convolution between transposes."""
    ib, if_, isp, ki, ko, ksp, ob, of, osp = strategy.dimension_numbers(op)
    location = op.location
    with ir.InsertionPoint(op):
        x = transposed(op.operands[0], [ib, *isp, if_], location)
        k = transposed(op.operands[1], [*ksp, ki, ko], location)
        output_type = ir.RankedTensorType(op.results[0].type)
        shape = output_type.shape
        canonical_type = ir.RankedTensorType.get([shape[ob], shape[osp[0]], shape[osp[1]], shape[of]], output_type.element_type)
        attributes = {name: op.attributes[name] for name in op.attributes if name != "dimension_numbers"}
        attributes["dimension_numbers"] = canonical_numbers()
        convolution = create_op("xhlo.convolution", [x, k], [canonical_type], attributes, location).results[0]
        back = [0] * 4
        for canonical, original in enumerate([ob, *osp, of]):
            back[original] = canonical
        result = transposed(convolution, back, location)
    op.results[0].replace_all_uses_with(result)
    op.erase()


@dataclass(frozen=True)
class ConvolutionLayoutPass(ModulePass):
    """Puts convolutions into NHWC x HWIO -> NHWC between transposes where a GEMM then pays."""

    name: ClassVar[str] = "xhlo-convolution-layout"
    summary: ClassVar[str] = "convolutions in other layouts become NHWC x HWIO -> NHWC between transposes when the cost model says a GEMM pays"

    def run(self, module: ir.Module) -> PassResult:
        lines = []
        changed = False
        with module.context, ir.Location.unknown():
            for op in list(ops_named(module, "xhlo.convolution")):
                geometry = strategy.geometry(op)
                if geometry is None or geometry.canonical:
                    continue
                if SHARDING in op.attributes:
                    lines.append(f"{describe(op)}: kept (its sharding is for its own layout)")
                    continue
                choice = strategy.choose(op)
                rewrite = choice.strategy == strategy.TRANSPOSED_GEMM
                lines.append(f"{describe(op)}: {'transposed to NHWC x HWIO -> NHWC' if rewrite else 'kept'} ({choice.describe()})")
                if rewrite:
                    canonicalize(op)
                    changed = True
        if not lines:
            return PassResult(changed)
        text = f"# convolution layouts: {sum('transposed to' in line for line in lines)} transposed, {len(lines)} not NHWC\n"
        return PassResult(changed, TextReport({"convolution-layout-decisions.txt": text + "".join(line + "\n" for line in lines)}))
