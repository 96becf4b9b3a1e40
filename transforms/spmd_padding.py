"""Uneven shardings in the SPMD partitioner: padded tiles, and the masks that keep the
padding out of results (XLA's `spmd_partitioner_util`: `PadToShape`, `MaskWithPadValue`).

What it decides, and why:

* **A dim its tiles do not divide is padded** to a multiple of the tile count: every
  partition holds ceil(n/k) elements of it, the last tiles ending in padding (a tile may be
  all padding). One local shape for every partition keeps the program SPMD, as in XLA.
* **What the padding holds is unspecified**: whatever the ops computed from it. Ops that keep
  positions apart (elementwise, broadcast, transpose, iota, ...) need nothing; ops that
  combine elements along a padded dim mask it first: a reduce selects its reducer's identity
  there, a dot contracting over it zeroes both operands' padding (zero on one side only
  would not do: padding that computed a NaN or an infinity times zero is NaN).
* **Gathering a padded dim slices the padding off** (the gathered value is the padded global
  array), and a dynamic-slice into finer tiles pads its input to whole tiles first, so that
  no partition's start is clamped.
"""

from __future__ import annotations

import numpy as np

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.dialects.xhlo.types import element_of, shape_of
from mlirxla.mlir import ir

from .spmd_builder import SpmdBuilder, tensor_type
from .spmd_tiling import Tiling


def padded_dims(tiling: Tiling, shape, dims=None) -> list[int]:
    """The dims (of `dims`, or all) whose tiles end in padding."""
    candidates = range(len(shape)) if dims is None else dims
    return [d for d in candidates if tiling.tiles[d] > 1 and shape[d] % tiling.tiles[d]]


def zero(element: ir.Type) -> ir.Attribute:
    if isinstance(element, ir.FloatType):
        return ir.FloatAttr.get(element, 0.0)
    return ir.IntegerAttr.get(element, 0)


def splat(value_type: ir.RankedTensorType, scalar: ir.Value) -> ir.Value:
    return create_op("xhlo.broadcast", [scalar], [value_type], {"dimensions": ir.DenseI64ArrayAttr.get([])}).result


def zero_scalar(element: ir.Type) -> ir.Value:
    attr = ir.DenseElementsAttr.get_splat(tensor_type([], element), zero(element))
    return create_op("xhlo.constant", [], [attr.type], {"value": attr}).result


def mask_padding(b: SpmdBuilder, value: ir.Value, shape, tiling: Tiling, dims, fill: ir.Value | None = None) -> ir.Value:
    """`value` (the local tile of a value of global `shape`) with the padding of `dims`
    replaced by the scalar `fill` (zero when None)."""
    dims = padded_dims(tiling, shape, dims)
    if not dims:
        return value
    local_type = ir.RankedTensorType(value.type)
    i32 = ir.IntegerType.get_signless(32)
    index_type = tensor_type(local_type.shape, i32)
    predicate_type = tensor_type(local_type.shape, ir.IntegerType.get_signless(1))
    inside = None
    for dim in dims:
        position = create_op("xhlo.iota", [], [index_type], {"iota_dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim)}).result
        offset = splat(index_type, b.table(tiling.offsets(shape, dim)))
        limit = splat(index_type, b.constant(np.array(shape[dim], dtype=np.int32), i32))
        position = b.emit("xhlo.add", [position, offset], index_type)
        below = create_op("xhlo.compare", [position, limit], [predicate_type],
                          {"comparison_direction": ir.StringAttr.get("LT"), "compare_type": ir.StringAttr.get("SIGNED")}).result
        inside = below if inside is None else b.emit("xhlo.and", [inside, below], predicate_type)
    if fill is None:
        fill = zero_scalar(local_type.element_type)
    return b.emit("xhlo.select", [inside, value, splat(local_type, fill)], local_type)


def pad_to(value: ir.Value, sizes) -> ir.Value:
    """`value` padded at the high end of each dim to `sizes` (with zeros)."""
    shape = shape_of(value.type)
    if list(shape) == list(sizes):
        return value
    element = element_of(value.type)
    high = [int(s) - int(n) for s, n in zip(sizes, shape)]
    return create_op("xhlo.pad", [value, zero_scalar(element)], [tensor_type(sizes, element)], {
        "edge_padding_low": ir.DenseI64ArrayAttr.get([0] * len(shape)), "edge_padding_high": ir.DenseI64ArrayAttr.get(high),
        "interior_padding": ir.DenseI64ArrayAttr.get([0] * len(shape))}).result


def slice_off_padding(value: ir.Value, sizes) -> ir.Value:
    """The first `sizes` elements of each dim of `value`."""
    shape = shape_of(value.type)
    if list(shape) == list(sizes):
        return value
    return create_op("xhlo.slice", [value], [tensor_type(sizes, element_of(value.type))], {
        "start_indices": ir.DenseI64ArrayAttr.get([0] * len(shape)), "limit_indices": ir.DenseI64ArrayAttr.get([int(s) for s in sizes]),
        "strides": ir.DenseI64ArrayAttr.get([1] * len(shape))}).result
