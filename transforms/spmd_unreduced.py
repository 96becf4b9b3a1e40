"""Making a whole value unreduced in the SPMD partitioner (XLA's and Shardy's reshard to an
`unreduced` sharding): which partition keeps which elements, the others holding zeros.

What it decides, and why:

* **A partition keeps what its source tile holds.** Among the partitions holding one target
  tile (one per label of the unreduced subgroup), an element is kept by the lowest label
  whose partition held it in the source tiling, zero elsewhere: a value sharded on "x" made
  unreduced over "x" keeps each tile where it was (`[0, 1, 0, 0]` and `[0, 0, 2, 3]` on two
  devices, as jax's tests expect of XLA), a replicated one stays on label 0 only. The sum
  over the labels is the value, and nothing moves.
* **Otherwise label 0 keeps everything**: when the source tiles of a group do not cover its
  target tile, or when two groups holding the same target tile would keep different parts
  under the same label (the source tiled along axes the target replicates), the partitions
  holding one tile and label would hold different summands, which the partitioner's tilings
  cannot say (`transforms/spmd_tiling.py`).
"""

from __future__ import annotations

import itertools

import numpy as np

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.mlir import ir

from .spmd_builder import SpmdBuilder, tensor_type
from .spmd_tiling import Tiling

Box = tuple[tuple[int, int], ...]


def tile_box(tiling: Tiling, partition: int, shape) -> Box:
    """The elements (start, stop per dim) the partition's tile holds, padding left out."""
    sizes = tiling.shard_shape(shape)
    return tuple((min(i * s, n), min((i + 1) * s, n)) for i, s, n in zip(tiling.index[partition], sizes, shape))


def covers(boxes: list[Box], whole: Box) -> bool:
    """Whether the boxes together hold every element of `whole`."""
    cuts = []
    for dim, (low, high) in enumerate(whole):
        points = sorted({low, high} | {min(max(b[dim][e], low), high) for b in boxes for e in (0, 1)})
        cuts.append([(a, c) for a, c in zip(points, points[1:]) if a < c])
    for cell in itertools.product(*cuts):
        if not any(all(b[d][0] <= a and c <= b[d][1] for d, (a, c) in enumerate(cell)) for b in boxes):
            return False
    return True


def kept_boxes(source: Tiling, target: Tiling, shape) -> list[tuple[Box, list[Box]]] | None:
    """Per partition, the box it keeps and the boxes of lower labels it leaves to them; None
    when label 0 must keep everything (module docstring)."""
    chosen: dict[tuple, list[Box]] = {}
    kept: list[tuple[Box, list[Box]] | None] = [None] * target.partitions
    for group in target.summand_groups():
        boxes = [tile_box(source, p, shape) for p in group]
        tile = target.index[group[0]]
        if chosen.setdefault(tile, boxes) != boxes or not covers(boxes, tile_box(target, group[0], shape)):
            return None
        for label, partition in enumerate(group):
            kept[partition] = (boxes[label], boxes[:label])
    return None if any(k is None for k in kept) else kept


def make_partial(b: SpmdBuilder, value: ir.Value, shape, source: Tiling, target: Tiling) -> ir.Value:
    """`value`, whole and tiled as `target` without its partial sums, as the partial sums of
    `target`'s unreduced value, from a `source`-tiled value (module docstring)."""
    kept = kept_boxes(source, target, shape) if len(shape) else None
    if kept is None:
        return b.keep_on(value, [label == 0 for label in target.partial])
    value_type = ir.RankedTensorType(value.type)
    i32, predicate = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(1)
    index_type, predicate_type = tensor_type(value_type.shape, i32), tensor_type(value_type.shape, predicate)
    spread = ir.DenseI64ArrayAttr.get([])
    positions = []
    for dim in range(len(shape)):
        iota = create_op("xhlo.iota", [], [index_type], {"iota_dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim)}).result
        offset = b.emit("xhlo.broadcast", [b.table(target.offsets(shape, dim))], index_type, dimensions=spread)
        positions.append(b.emit("xhlo.add", [iota, offset], index_type))

    def compare(position, bound: list[int], direction: str) -> ir.Value:
        splat = b.emit("xhlo.broadcast", [b.table(bound)], index_type, dimensions=spread)
        return b.emit("xhlo.compare", [position, splat], predicate_type, comparison_direction=ir.StringAttr.get(direction),
                      compare_type=ir.StringAttr.get("SIGNED"))

    def inside(boxes: list[Box]) -> ir.Value:
        result = None
        for dim, position in enumerate(positions):
            for bound, direction in ((0, "GE"), (1, "LT")):
                test = compare(position, [box[dim][bound] for box in boxes], direction)
                result = test if result is None else b.emit("xhlo.and", [result, test], predicate_type)
        return result

    empty: Box = tuple((0, 0) for _ in shape)
    mask = inside([own for own, _ in kept])
    for slot in range(max(len(lower) for _, lower in kept)):
        left = inside([lower[slot] if slot < len(lower) else empty for _, lower in kept])
        mask = b.emit("xhlo.and", [mask, b.emit("xhlo.not", [left], predicate_type)], predicate_type)
    zero = b.emit("xhlo.convert", [b.constant(np.array(0, np.int32), i32)], tensor_type([], value_type.element_type))
    zeros = b.emit("xhlo.broadcast", [zero], value_type, dimensions=spread)
    return b.emit("xhlo.select", [mask, value, zeros], value_type)
