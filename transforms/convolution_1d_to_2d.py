"""xhlo-convolution-1d-to-2d: a convolution with one spatial dimension becomes the same
convolution with two, the first of size 1, between reshapes (a reshape adding a unit
dimension moves no data).

The CPU backend's GEMM strategies, its cost model and the layout pass take 2-D convolutions
only (`convolution_strategy.geometry`), so a 1-D one (audio, text: `lax.conv_general_dilated`
over NWC) ran as plain loops, its input gradient of a stride-2 layer (16x1024x64 through a
5-wide window into 64 features) at 117 ms where XLA:CPU takes 11 ms. Each operand and the
result gain a unit dimension just before their spatial one, which becomes the second spatial
dimension: NWC x WIO -> NWC is then NHWC x HWIO -> NHWC with H = 1, the layout the GEMM
strategies read straight from the buffers. Window attributes gain a trivial first entry
(stride 1, no padding, no dilation, no reversal). A convolution carrying a sharding is kept.
Changed: any convolution rewritten.
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir

from .convolution_strategy import dimension_numbers, window_padding
from .pass_base import ModulePass, PassResult
from .sharding_remover import SHARDING
from .spmd_windowed import padding_attribute

WINDOW_ARRAYS = ("window_strides", "lhs_dilation", "rhs_dilation")  # each 1 along the unit dimension


def with_unit_dimension(value: ir.Value, position: int, location: ir.Location) -> ir.Value:
    """`value` reshaped with a dimension of size 1 inserted at `position`."""
    value_type = ir.RankedTensorType(value.type)
    shape = list(value_type.shape)
    shape.insert(position, 1)
    result_type = ir.RankedTensorType.get(shape, value_type.element_type)
    return create_op("xhlo.reshape", [value], [result_type], {}, location).results[0]


def shifted(dimension: int, position: int) -> int:
    """Where `dimension` is once a unit dimension is inserted at `position`."""
    return dimension + 1 if dimension >= position else dimension


def two_dimensional_numbers(op: ir.Operation) -> ir.Attribute:
    """The dimension numbers once each tensor has a unit dimension before its spatial one."""
    ib, if_, (isp,), ki, ko, (ksp,), ob, of, (osp,) = dimension_numbers(op)

    def i64(value: int) -> ir.Attribute:
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)

    return ir.DictAttr.get({
        "input_batch_dimension": i64(shifted(ib, isp)), "input_feature_dimension": i64(shifted(if_, isp)),
        "input_spatial_dimensions": ir.DenseI64ArrayAttr.get([isp, isp + 1]),
        "kernel_input_feature_dimension": i64(shifted(ki, ksp)), "kernel_output_feature_dimension": i64(shifted(ko, ksp)),
        "kernel_spatial_dimensions": ir.DenseI64ArrayAttr.get([ksp, ksp + 1]),
        "output_batch_dimension": i64(shifted(ob, osp)), "output_feature_dimension": i64(shifted(of, osp)),
        "output_spatial_dimensions": ir.DenseI64ArrayAttr.get([osp, osp + 1]),
    })


def two_dimensional_window(op: ir.Operation) -> dict[str, ir.Attribute]:
    """The window attributes with a trivial first spatial dimension."""
    attributes = {}
    for name in WINDOW_ARRAYS:
        if name in op.attributes:
            attributes[name] = ir.DenseI64ArrayAttr.get([1, *ir.DenseI64ArrayAttr(op.attributes[name])])
    if "padding" in op.attributes:
        attributes["padding"] = padding_attribute([[0, 0], *window_padding(op, 1)])
    if "window_reversal" in op.attributes:
        attributes["window_reversal"] = ir.DenseBoolArrayAttr.get([False, *ir.DenseBoolArrayAttr(op.attributes["window_reversal"])])
    return attributes


def lift(op: ir.Operation) -> None:
    """Replace the 1-D convolution `op` by the 2-D one between reshapes."""
    _, _, (isp,), _, _, (ksp,), _, _, (osp,) = dimension_numbers(op)
    location = op.location
    with ir.InsertionPoint(op):
        lhs = with_unit_dimension(op.operands[0], isp, location)
        rhs = with_unit_dimension(op.operands[1], ksp, location)
        output_type = ir.RankedTensorType(op.results[0].type)
        shape = list(output_type.shape)
        shape.insert(osp, 1)
        attributes = {name: op.attributes[name] for name in op.attributes}
        attributes["dimension_numbers"] = two_dimensional_numbers(op)
        attributes.update(two_dimensional_window(op))
        convolution = create_op("xhlo.convolution", [lhs, rhs], [ir.RankedTensorType.get(shape, output_type.element_type)],
                                attributes, location).results[0]
        result = create_op("xhlo.reshape", [convolution], [output_type], {}, location).results[0]
    op.results[0].replace_all_uses_with(result)
    op.erase()


@dataclass(frozen=True)
class Convolution1dTo2dPass(ModulePass):
    """Gives every 1-D convolution a unit first spatial dimension."""

    name: ClassVar[str] = "xhlo-convolution-1d-to-2d"
    summary: ClassVar[str] = "1-D convolutions become 2-D ones with a unit first spatial dimension, between reshapes"

    def run(self, module: ir.Module) -> PassResult:
        changed = False
        with module.context, ir.Location.unknown():
            for op in list(ops_named(module, "xhlo.convolution")):
                if len(dimension_numbers(op)[2]) == 1 and SHARDING not in op.attributes:
                    lift(op)
                    changed = True
        return PassResult(changed)
