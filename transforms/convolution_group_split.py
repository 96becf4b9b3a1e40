"""xhlo-convolution-group-split: a grouped convolution whose groups are wide enough becomes one
ungrouped convolution per group, their results concatenated.

A convolution with `feature_group_count` G convolves each 1/G of the input features with its
own 1/G of the kernel's output features; one with `batch_group_count` G each 1/G of the input
batch (a per-example weight gradient). Only the generated loop nest ran such a convolution
(the GEMM strategies take one group), and for groups of several input and output features
its loops ran scalar: jax's per-example convolution (`vmap` of a convolution with a batched
kernel, which jax folds into 16 groups of 8 features) took 7.3 ms where XLA:CPU takes 2.8.
Each group is a plain convolution of its slice of the input with its slice of the kernel's
output features (the StableHLO spec defines both kinds of groups so), which the convolution
strategy then runs as a GEMM or the register-tiled convolution; the results, concatenated
along the output features, are the grouped convolution's.

It takes convolutions of f32 or f64 with one kind of groups, at most `MAX_GROUPS` of them,
each group at least `MIN_GROUP_DEPTH` multiply-adds deep (its window times its input
features: a per-example weight gradient's window is the output gradient's whole image) and
`MIN_GROUP_OUTPUTS` output features wide, and no sharding; a depthwise 3x3 convolution (one
input feature per group, 9 deep) keeps its loop nest, which vectorizes along the channels
(jax's `conv_general_dilated_patches`, grouped so too, became slices before this pass). Changed: any convolution split.
"""

import math
from dataclasses import dataclass
from typing import ClassVar

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.dialects.xhlo.types import element_of, shape_of
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir

from .convolution_strategy import dimension_numbers
from .pass_base import ModulePass, PassResult
from .sharding_remover import SHARDING
from .spmd_builder import tensor_type
from .transposed_convolution_phases import sliced

MAX_GROUPS = 64
MIN_GROUP_DEPTH = 32  # multiply-adds per output element of a group: its window times its input features
MIN_GROUP_OUTPUTS = 8


def group_count(op: ir.Operation, name: str) -> int:
    return ir.IntegerAttr(op.attributes[name]).value if name in op.attributes else 1


def grouping(op: ir.Operation) -> tuple[str, int, int] | None:
    """(the group count attribute, its count, the input dimension its groups split) of a
    grouped convolution worth splitting into its groups, else None."""
    input_batch, input_feature, _, kernel_input, kernel_output, kernel_spatial, _, _, _ = dimension_numbers(op)
    features, batches = group_count(op, "feature_group_count"), group_count(op, "batch_group_count")
    if (features > 1) == (batches > 1) or SHARDING in op.attributes or str(element_of(op.results[0].type)) not in ("f32", "f64"):
        return None
    name, groups, split = ("feature_group_count", features, input_feature) if features > 1 else ("batch_group_count", batches, input_batch)
    kernel_shape = shape_of(op.operands[1].type)
    depth = kernel_shape[kernel_input] * math.prod(kernel_shape[d] for d in kernel_spatial)
    if groups > MAX_GROUPS or depth < MIN_GROUP_DEPTH or kernel_shape[kernel_output] // groups < MIN_GROUP_OUTPUTS:
        return None
    return name, groups, split


def split_into_groups(op: ir.Operation, name: str, groups: int, split: int) -> None:
    """Replace `op` by one convolution per group, concatenated along the output features: the
    input cut along `split` (its features, or for batch groups its batch) and the kernel's
    output features into `groups` equal parts (the StableHLO spec's definition of both)."""
    _, _, _, _, kernel_output, _, _, output_feature, _ = dimension_numbers(op)
    inputs = shape_of(op.operands[0].type)[split] // groups
    outputs = shape_of(op.operands[1].type)[kernel_output] // groups
    result_shape = list(shape_of(op.results[0].type))
    result_shape[output_feature] = outputs
    attributes = {key: op.attributes[key] for key in op.attributes}
    attributes[name] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 1)
    with ir.InsertionPoint(op), op.location:
        parts = [create_op("xhlo.convolution",
                           [sliced(op.operands[0], [split], [g * inputs], [(g + 1) * inputs], [1]),
                            sliced(op.operands[1], [kernel_output], [g * outputs], [(g + 1) * outputs], [1])],
                           [tensor_type(result_shape, element_of(op.results[0].type))], attributes).result
                 for g in range(groups)]
        joined = create_op("xhlo.concatenate", parts, [op.results[0].type],
                           {"dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), output_feature)}).result
    op.results[0].replace_all_uses_with(joined)
    op.erase()


@dataclass(frozen=True)
class ConvolutionGroupSplitPass(ModulePass):
    """Splits every grouped convolution with wide enough groups into its groups."""

    name: ClassVar[str] = "xhlo-convolution-group-split"
    summary: ClassVar[str] = "a grouped convolution with wide groups becomes one convolution per group, concatenated"

    def run(self, module: ir.Module) -> PassResult:
        chosen = [(op, found) for op in ops_named(module, "xhlo.convolution") if (found := grouping(op)) is not None]
        with module.context:
            for op, found in chosen:
                split_into_groups(op, *found)
        return PassResult(bool(chosen))
