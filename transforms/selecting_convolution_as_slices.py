"""xhlo-selecting-convolution-as-slices: a convolution whose kernel only selects (each output
feature reads one input feature at one window position, with weight 1) becomes the padded
input's shifted windows, sliced and interleaved along the output features.

jax's `lax.conv_general_dilated_patches` (and `conv_general_dilated_local`, built on it)
extracts patches with a convolution whose kernel is a one-hot matrix made of iota and
compare, grouped by input feature: for 8 x 32 x 32 x 16 in 3 x 3 windows, 16 groups of one
input feature and 9 outputs, 9 multiply-adds an output. The generated loop nest took 39 ms
(XLA:CPU's convolution 5-7 ms) for what is a copy: output feature `o` of group `g` at
position `p` is the padded input at `p * stride + offset(o) * rhs_dilation`, feature
`g * per_group + i(o)`. The rewrite pads the input once, takes one strided slice per window
offset the kernel uses, and interleaves them with a concatenate along a unit dimension next
to the features (then a reshape), in the order the kernel's output features ask: input
feature major and offset minor, or the other way round (any other order is left alone).
The gradient of the patches is a kernel with one output a group that sums the group's
entries which copied each input: the sum of one strided slice per entry (its offset, every
per-group-th feature from its own), at most `MAX_SUMMED_SLICES` of them (43 -> 21 ms,
XLA:CPU 75).

Read from the kernel: its values when it is a constant, or computed from constants, iotas,
broadcasts, reshapes, transposes, reverses, converts and compares of at most `MAX_KERNEL_ELEMENTS`
elements (jax's one-hot kernel is not folded: the constant folder keeps iotas). Every group
must select the same way, every entry of the kernel be exactly 0 or 1.

Decided: the products with the kernel's zeros are dropped, so an infinity or NaN in the
input reaches only the outputs that select it; the convolution's sums spread it as NaN to
every output whose window holds it (0 * inf). The rewrite keeps what the patches are, as
jax documents them, not that side effect (docs/decisions.md). Taken: float and integer
elements with the result's element type the input's, one kind of groups (features), no
input dilation, no negative padding, no sharding. Changed: any convolution rewritten.
"""

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.dialects.xhlo.types import element_of, shape_of
from mlirxla.ir_queries import defining_op, ops_named
from mlirxla.mlir import ir
from mlirxla.runtime.literals import storage_dtype, to_numpy

from .algsimp_patterns.common import is_float, is_integer
from .convolution_group_split import group_count
from .convolution_strategy import dimension_numbers, window_attribute, window_padding
from .pass_base import ModulePass, PassResult
from .sharding_remover import SHARDING
from .spmd_builder import i64, tensor_type
from .spmd_padding import zero_scalar
from .transposed_convolution_phases import sliced

MAX_KERNEL_ELEMENTS = 1 << 16
MAX_SUMMED_SLICES = 64
COMPARES = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal, "GT": np.greater, "GE": np.greater_equal}


def broadcast_array(operand: np.ndarray, dimensions: list[int], shape: list[int]) -> np.ndarray:
    """`operand` broadcast into `shape`, its dimension d becoming result dimension dimensions[d]."""
    order = sorted(range(len(dimensions)), key=lambda d: dimensions[d])
    placed = np.transpose(operand, order)
    expanded = [1] * len(shape)
    for d in order:
        expanded[dimensions[d]] = operand.shape[d]
    return np.broadcast_to(placed.reshape(expanded), shape)


def evaluated(value: ir.Value) -> np.ndarray | None:
    """The values of `value` when constants, iotas and the shape, reverse and compare ops
    above make it (as numpy, in storage dtypes), else None."""
    op = defining_op(value)
    if op is None or math.prod(shape_of(value.type)) > MAX_KERNEL_ELEMENTS:
        return None
    shape, dtype = shape_of(value.type), storage_dtype(element_of(value.type))
    if op.name == "xhlo.constant":
        return to_numpy(op.attributes["value"])
    if op.name == "xhlo.iota":
        dimension = ir.IntegerAttr(op.attributes["iota_dimension"]).value
        return broadcast_array(np.arange(shape[dimension], dtype=dtype), [dimension], shape)
    operands = [evaluated(operand) for operand in op.operands]
    if any(operand is None for operand in operands):
        return None
    if op.name == "xhlo.broadcast":
        return broadcast_array(operands[0], list(ir.DenseI64ArrayAttr(op.attributes["dimensions"])), shape)
    if op.name == "xhlo.reshape":
        return operands[0].reshape(shape)
    if op.name == "xhlo.transpose":
        return np.transpose(operands[0], list(ir.DenseI64ArrayAttr(op.attributes["permutation"])))
    if op.name == "xhlo.reverse":
        return np.flip(operands[0], list(ir.DenseI64ArrayAttr(op.attributes["dimensions"])))
    if op.name == "xhlo.convert" and (operands[0].dtype.kind in "biu"):
        return operands[0].astype(dtype)
    if op.name == "xhlo.compare" and operands[0].dtype.kind in "biu":
        return COMPARES[ir.StringAttr(op.attributes["comparison_direction"]).value](*operands)
    return None


@dataclass(frozen=True)
class Interleaving:
    """How a selecting kernel's output features read the input: offsets (flat window
    positions, row-major over the kernel's spatial dimensions) in the order they interleave,
    and whether the input feature is the major index within a group (else the offset is)."""

    offsets: tuple[int, ...]
    feature_major: bool


@dataclass(frozen=True)
class WindowSum:
    """A kernel with one output feature a group, summing its group's input feature
    `features[j]` at window offset `offsets[j]` for each j (the gradient of a patch
    extraction: each input element sums the patch entries that copied it)."""

    offsets: tuple[int, ...]
    features: tuple[int, ...]


def kernel_rows(op: ir.Operation) -> np.ndarray | None:
    """The kernel as one row per output feature over (input feature, flat window offset),
    when it is all zeros and ones."""
    _, _, _, kernel_input, kernel_output, kernel_spatial, _, _, _ = dimension_numbers(op)
    kernel = evaluated(op.operands[1])
    if kernel is None or not np.isin(kernel, (0, 1)).all():
        return None
    return np.transpose(kernel, [kernel_output, kernel_input, *kernel_spatial]).reshape(kernel.shape[kernel_output], -1)


def selection(op: ir.Operation) -> Interleaving | WindowSum | None:
    """What a convolution's kernel selects, when it is a selection the rewrite takes."""
    rows = kernel_rows(op)
    if rows is None or not rows.any(axis=1).all():
        return None
    groups = group_count(op, "feature_group_count")
    per_group_inputs = shape_of(op.operands[1].type)[dimension_numbers(op)[3]]
    window = rows.shape[1] // per_group_inputs
    per_group = rows.reshape(groups, rows.shape[0] // groups, -1)
    if (per_group != per_group[0]).any():
        return None
    if (np.count_nonzero(rows, axis=1) == 1).all():
        return interleaving(np.argmax(per_group[0], axis=1), window, per_group_inputs)
    if per_group.shape[1] == 1 and np.count_nonzero(rows[0]) <= MAX_SUMMED_SLICES:
        features, offsets = np.divmod(np.flatnonzero(per_group[0, 0]), window)
        return WindowSum(tuple(int(o) for o in offsets), tuple(int(f) for f in features))
    return None


def interleaving(picks: np.ndarray, window: int, per_group_inputs: int) -> Interleaving | None:
    """The interleaving of a group's outputs that read (input feature, offset) = divmod(picks,
    window), when it is feature-major or offset-major."""
    outputs = len(picks)
    if outputs % per_group_inputs:
        return None
    inputs, offsets = np.divmod(picks, window)
    used = outputs // per_group_inputs
    position = np.arange(outputs)
    for feature_major in (True, False):
        feature, slot = (position // used, position % used) if feature_major else (position % per_group_inputs, position // per_group_inputs)
        order = [int(offsets[(feature == 0) & (slot == s)][0]) for s in range(used)]
        if len(set(order)) == used and (inputs == feature).all() and (offsets == np.asarray(order)[slot]).all():
            return Interleaving(tuple(order), feature_major)
    return None


def rewritable(op: ir.Operation) -> bool:
    """A convolution of the kinds the module docstring lists (its kernel not yet read)."""
    input_type, result_type = op.operands[0].type, op.results[0].type
    element = element_of(result_type)
    spatial = len(dimension_numbers(op)[2])
    return (element == element_of(input_type) and (is_float(element) or (is_integer(element) and ir.IntegerType(element).width > 1))
            and group_count(op, "batch_group_count") == 1 and SHARDING not in op.attributes
            and window_attribute(op, "lhs_dilation", [1] * spatial) == [1] * spatial
            and all(low >= 0 and high >= 0 for low, high in window_padding(op, spatial)))


def padded_input(op: ir.Operation) -> ir.Value:
    """The convolution's input with its window padding (zeros) around the spatial dimensions."""
    _, _, input_spatial, _, _, _, _, _, _ = dimension_numbers(op)
    source = op.operands[0]
    shape, element = shape_of(source.type), element_of(source.type)
    low, high = [0] * len(shape), [0] * len(shape)
    for dim, (before, after) in zip(input_spatial, window_padding(op, len(input_spatial))):
        low[dim], high[dim] = before, after
    if not any(low) and not any(high):
        return source
    padded_shape = [size + before + after for size, before, after in zip(shape, low, high)]
    return create_op("xhlo.pad", [source, zero_scalar(element)], [tensor_type(padded_shape, element)], {
        "edge_padding_low": ir.DenseI64ArrayAttr.get(low), "edge_padding_high": ir.DenseI64ArrayAttr.get(high),
        "interior_padding": ir.DenseI64ArrayAttr.get([0] * len(shape))}).result


def window_slice(op: ir.Operation, padded: ir.Value, offset: int, first_feature: int = 0, feature_step: int = 1) -> ir.Value:
    """The padded input at flat window offset `offset` for every output position (the input's
    layout, the output's spatial sizes), its features from `first_feature` by `feature_step`."""
    _, input_feature, input_spatial, _, _, kernel_spatial, _, _, output_spatial = dimension_numbers(op)
    kernel_shape = shape_of(op.operands[1].type)
    window = [kernel_shape[d] for d in kernel_spatial]
    strides = window_attribute(op, "window_strides", [1] * len(window))
    dilations = window_attribute(op, "rhs_dilation", [1] * len(window))
    outputs = [shape_of(op.results[0].type)[d] for d in output_spatial]
    starts = [int(p) * dilation for p, dilation in zip(np.unravel_index(offset, window), dilations)]
    stops = [start + (count - 1) * stride + 1 for start, count, stride in zip(starts, outputs, strides)]
    features = shape_of(padded.type)[input_feature]
    return sliced(padded, [*input_spatial, input_feature], [*starts, first_feature], [*stops, features], [*strides, feature_step])


def interleaved(op: ir.Operation, chosen: Interleaving) -> ir.Value:
    """The window slices interleaved along the input features into the output features, in
    the input's dimension order: each slice's features split into (groups, per-group inputs)
    with a unit dimension for the offset beside them, concatenated along it, merged back."""
    input_feature = dimension_numbers(op)[1]
    padded = padded_input(op)
    slices = [window_slice(op, padded, offset) for offset in chosen.offsets]
    shape, element = shape_of(slices[0].type), element_of(slices[0].type)
    groups = group_count(op, "feature_group_count")
    split = [groups, shape[input_feature] // groups, 1] if chosen.feature_major else [groups, 1, shape[input_feature] // groups]
    unit = input_feature + (2 if chosen.feature_major else 1)
    split_shape = shape[:input_feature] + split + shape[input_feature + 1:]
    parts = [create_op("xhlo.reshape", [part], [tensor_type(split_shape, element)], {}).result for part in slices]
    joined_shape = list(split_shape)
    joined_shape[unit] = len(parts)
    joined = parts[0] if len(parts) == 1 else create_op(
        "xhlo.concatenate", parts, [tensor_type(joined_shape, element)], {"dimension": i64(unit)}).result
    merged_shape = list(shape)
    merged_shape[input_feature] = math.prod(joined_shape[input_feature:input_feature + 3])
    return create_op("xhlo.reshape", [joined], [tensor_type(merged_shape, element)], {}).result


def summed(op: ir.Operation, chosen: WindowSum) -> ir.Value:
    """The sum of the window slices, each taking one input feature of every group (features
    `feature`, `feature` + per-group inputs, ...), in the input's dimension order."""
    padded = padded_input(op)
    per_group_inputs = shape_of(op.operands[1].type)[dimension_numbers(op)[3]]
    total = None
    for offset, feature in zip(chosen.offsets, chosen.features):
        term = window_slice(op, padded, offset, feature, per_group_inputs)
        total = term if total is None else create_op("xhlo.add", [total, term], [term.type], {}).result
    return total


def in_output_layout(op: ir.Operation, value: ir.Value) -> ir.Value:
    """`value`, in the input's dimension order, transposed to the output's."""
    input_batch, input_feature, input_spatial, _, _, _, output_batch, output_feature, output_spatial = dimension_numbers(op)
    permutation = [0] * len(shape_of(value.type))
    for output_dim, input_dim in zip((output_batch, output_feature, *output_spatial), (input_batch, input_feature, *input_spatial)):
        permutation[output_dim] = input_dim
    if permutation == sorted(permutation):
        return value
    return create_op("xhlo.transpose", [value], [op.results[0].type], {"permutation": ir.DenseI64ArrayAttr.get(permutation)}).result


@dataclass(frozen=True)
class SelectingConvolutionAsSlicesPass(ModulePass):
    """Rewrites every convolution whose kernel only selects into slices of its input."""

    name: ClassVar[str] = "xhlo-selecting-convolution-as-slices"
    summary: ClassVar[str] = "a convolution whose kernel only selects input elements becomes slices of the padded input"

    def run(self, module: ir.Module) -> PassResult:
        chosen = [(op, found) for op in ops_named(module, "xhlo.convolution")
                  if rewritable(op) and (found := selection(op)) is not None]
        with module.context:
            for op, found in chosen:
                with ir.InsertionPoint(op), op.location:
                    found_value = interleaved(op, found) if isinstance(found, Interleaving) else summed(op, found)
                    result = in_output_layout(op, found_value)
                op.results[0].replace_all_uses_with(result)
                op.erase()
        return PassResult(bool(chosen))
