"""Moving a partitioned value from one tiling to another (XLA's `PartitionedHlo::Reshard`).

What it decides, and why, in the order it tries (the first that applies):

1. the same tile on every partition: nothing to do;
2. tiled on dim a -> tiled on dim b over the same partitions in the same order (the other dims
   alike): one all-to-all (XLA's `ReshardWithAllToAll`), which moves (n-1)/n of the shard
   where gathering and slicing would move (n-1) shards;
3. the same tile counts, partitions holding different tiles: one collective-permute, each
   partition receiving its new tile from a holder of it (XLA's `ReshardWithCollectivePermute`);
4. otherwise: all-gather every dim the target does not tile as a refinement of the source
   (XLA's replication by all-gather), then dynamic-slice each partition's part of the dims the
   target tiles more finely, at offsets read from a table by partition id (replicated ->
   tiled costs no communication at all).

A reduction's partial results (a dot contracting over sharded dims, a reduce over sharded
dims) finish with `finish_partial`: when the target tiles one dim (further) across exactly the
partitions that hold the partial sums, a reduce-scatter (XLA's all-reduce + dynamic-slice
clean-up, done at once); else an all-reduce, then resharding. `plan` and `cost` let the
partitioner compare strategies by bytes moved per device before emitting any.

Unreduced values (partial sums, `Tiling.partial`) keep their value through a reshard: a
partial source becomes whole by an all-reduce over the partitions holding its summands of one
tile; a whole value becomes partial by each partition keeping the part its source tile held
(label 0 what several held) and zeros elsewhere (`transforms/spmd_unreduced.py`). Between
two tilings partial alike, tiles move among partitions of one label only. A reduction whose
partial sums lie over exactly the target's unreduced partitions leaves them unsummed
(`finish_partial`): a dot contracting over an axis its result is unreduced on needs no
collective.

Uneven tiles (`transforms/spmd_padding.py`) are padded: an all-gather of a padded dim slices
the padding off, a slice into finer tiles pads to whole tiles first, an all-to-all is only
taken when both dims divide evenly, and a tile refines another only when it lies inside it
with the padding included.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlirxla.dialects.xhlo.types import element_of, shape_of
from mlirxla.mlir import ir

from .spmd_builder import SpmdBuilder, byte_size
from .spmd_padding import pad_to, slice_off_padding
from .spmd_tiling import Tiling
from .spmd_unreduced import make_partial


@dataclass(frozen=True)
class Step:
    kind: str  # all-to-all | permute | gather | slice
    dims: tuple[int, ...] = ()
    groups: tuple[tuple[int, ...], ...] = ()


def summing(element: ir.Type) -> str:
    """The reducer that totals partial values of `element` (or for booleans)."""
    return "or" if isinstance(element, ir.IntegerType) and ir.IntegerType(element).width == 1 else "add"


def refines(source: Tiling, target: Tiling, dim: int, shape) -> bool:
    """The target's tiles of `dim` lie inside the source's tile on every partition (with
    uneven tiles, only when the source's padded tile is a whole number of the target's)."""
    if target.tiles[dim] % source.tiles[dim]:
        return False
    split = target.tiles[dim] // source.tiles[dim]
    if source.tiles[dim] > 1 and source.shard_shape(shape)[dim] != split * target.shard_shape(shape)[dim]:
        return False
    return all(t[dim] // split == s[dim] for s, t in zip(source.index, target.index))


def all_to_all_dims(source: Tiling, target: Tiling, shape) -> tuple[int, int] | None:
    moved_from = [d for d in range(source.rank) if source.tiles[d] > 1 and target.tiles[d] == 1]
    moved_to = [d for d in range(source.rank) if source.tiles[d] == 1 and target.tiles[d] > 1]
    if len(moved_from) != 1 or len(moved_to) != 1:
        return None
    a, b = moved_from[0], moved_to[0]
    if source.tiles[a] != target.tiles[b] or shape[a] % source.tiles[a] or shape[b] % target.tiles[b]:
        return None
    for p, (s, t) in enumerate(zip(source.index, target.index)):
        if s[a] != t[b] or any(s[d] != t[d] for d in range(source.rank) if d not in (a, b)) or source.label(p) != target.label(p):
            return None
    if any(source.tiles[d] != target.tiles[d] for d in range(source.rank) if d not in (a, b)):
        return None
    return a, b


def permute_pairs(source: Tiling, target: Tiling) -> list[tuple[int, int]]:
    """(source partition, target partition): each partition gets its target tile from a
    distinct holder of it (the holders of a tile are as many in both tilings)."""
    holders: dict[tuple, list[int]] = {}
    for partition, key in enumerate(source.keys()):
        holders.setdefault(key, []).append(partition)
    # a partition that already holds its tile keeps it
    pairs, waiting = [], []
    target_keys = target.keys()
    for partition, key in enumerate(target_keys):
        if partition in holders.get(key, []):
            holders[key].remove(partition)
            pairs.append((partition, partition))
        else:
            waiting.append(partition)
    for partition in waiting:
        pairs.append((holders[target_keys[partition]].pop(0), partition))
    return sorted(pairs, key=lambda p: p[1])


def plan(source: Tiling, target: Tiling, shape) -> list[Step]:
    """The steps resharding a value of global `shape` from `source` to `target` takes."""
    if source.same_placement(target):
        return []
    if (dims := all_to_all_dims(source, target, shape)) is not None:
        groups = source.groups_over([dims[0]])
        if groups is not None:
            return [Step("all-to-all", dims, tuple(tuple(g) for g in groups))]
    if source.tiles == target.tiles and source.valid() and target.valid():
        return [Step("permute")]
    steps, current = [], source
    for dim in range(source.rank):
        if source.tiles[dim] > 1 and not refines(source, target, dim, shape):
            groups = current.groups_over([dim])
            steps.append(Step("gather", (dim,), tuple(tuple(g) for g in groups)))
            current = current.without([dim])
    sliced = tuple(d for d in range(source.rank) if target.tiles[d] > current.tiles[d])
    if sliced:
        steps.append(Step("slice", sliced))
    return steps


def cost(shape, element, source: Tiling, target: Tiling) -> float:
    """Bytes each device sends to reshard a value of global `shape` from `source` to `target`."""
    total, current = 0.0, source
    if source.partial != target.partial:
        if source.partial is not None:
            size = len(set(source.partial))
            total += 2 * byte_size(source.shard_shape(shape), element) * (size - 1) / size
        return total + cost(shape, element, source.with_partial(None), target.with_partial(None))
    for step in plan(source, target, shape):
        local = current.shard_shape(shape)
        size = byte_size(local, element)
        if step.kind == "gather":
            total += size * (len(step.groups[0]) - 1)
            current = current.without(step.dims)
        elif step.kind == "all-to-all":
            total += size * (len(step.groups[0]) - 1) / len(step.groups[0])
        elif step.kind == "permute":
            total += size
    return total


def reshard(b: SpmdBuilder, value: ir.Value, shape, source: Tiling, target: Tiling) -> ir.Value:
    """`value`, the local part of a value of global `shape` tiled by `source`, as `target`'s."""
    if source.partial != target.partial:
        if source.partial is not None:
            value = b.all_reduce(value, source.summand_groups(), summing(element_of(value.type)))
            source = source.with_partial(None)
        whole = reshard(b, value, shape, source, target.with_partial(None))
        return whole if target.partial is None else make_partial(b, whole, shape, source, target)
    current = source
    for step in plan(source, target, shape):
        if step.kind == "all-to-all":
            a, d = step.dims
            value = b.all_to_all(value, d, a, [list(g) for g in step.groups])
            current = target
        elif step.kind == "permute":
            value = b.collective_permute(value, permute_pairs(source, target))
            current = target
        elif step.kind == "gather":
            value = b.all_gather(value, step.dims[0], [list(g) for g in step.groups])
            current = current.without(step.dims)
            value = slice_off_padding(value, current.shard_shape(shape))
        else:
            value = slice_to(b, value, shape, current, target)
            current = target
    return value


def slice_to(b: SpmdBuilder, value: ir.Value, shape, current: Tiling, target: Tiling) -> ir.Value:
    """Each partition's part of the target within the tile it holds (the target refines it),
    the tile padded to whole target tiles first."""
    sizes = target.shard_shape(shape)
    starts, whole = [], []
    for dim in range(len(shape)):
        split = target.tiles[dim] // current.tiles[dim]
        starts.append(b.table([(t[dim] % split) * sizes[dim] for t in target.index]))
        whole.append(split * sizes[dim])
    return b.dynamic_slice(pad_to(value, whole), starts, sizes)


def finish_partial(b: SpmdBuilder, value: ir.Value, shape, current: Tiling, groups: list[list[int]], reducer: str,
                   target: Tiling) -> ir.Value:
    """Sum the partial results held by each of `groups` (partitions holding `current`'s tile
    of the partial value, ordered by the tile of the reduced dims they hold), then reshard to
    `target`; or, when `target` is unreduced over exactly those partials, leave them."""
    if target.partial is not None:
        if reducer == "add" and current.partial is None and summands_are_labels(current, groups, target):
            return reshard(b, value, shape, current.with_partial(target.partial), target)
        whole = finish_partial(b, value, shape, current, groups, reducer, target.with_partial(None))
        return reshard(b, whole, shape, target.with_partial(None), target)
    scatter = scatter_dim(current, groups, target, shape)
    if scatter is not None:
        dim, ordered = scatter
        padded = list(shape_of(value.type))
        padded[dim] = target.shard_shape(shape)[dim] * len(ordered[0])
        return b.reduce_scatter(pad_to(value, padded), dim, ordered, reducer)
    return reshard(b, b.all_reduce(value, groups, reducer), shape, current, target)


def summands_are_labels(current: Tiling, groups: list[list[int]], target: Tiling) -> bool:
    """Whether the partial results of `groups` are summands of the target's unreduced value
    as they lie: each group has one member per target label, and the partitions holding one
    tile and label hold the same summand (their place in their group, which is the tile of
    the reduced dims they hold, is the same)."""
    labels = len(set(target.partial))
    summand: dict[tuple, int] = {}
    for group in groups:
        if len(group) != labels or sorted(target.partial[p] for p in group) != list(range(labels)):
            return False
        for place, partition in enumerate(group):
            key = (current.index[partition], target.partial[partition])
            if summand.setdefault(key, place) != place:
                return False
    return True


def scatter_dim(current: Tiling, groups: list[list[int]], target: Tiling, shape) -> tuple[int, list[list[int]]] | None:
    """The dim a reduce-scatter over `groups` leaves tiled as `target` tiles it, with each
    group ordered by the members' target tile; None when there is none. The partial value
    may be tiled on that dim already: each group then splits its own tile `size` ways (its
    members' target tiles are that tile's parts, padding aligned)."""
    finer = [d for d in range(current.rank) if target.tiles[d] != current.tiles[d]]
    if len(finer) != 1:
        return None
    dim = finer[0]
    size = len(groups[0])
    if target.tiles[dim] != current.tiles[dim] * size:
        return None
    if current.tiles[dim] > 1 and current.shard_shape(shape)[dim] != size * target.shard_shape(shape)[dim]:
        return None
    ordered = []
    for group in groups:
        by_tile = sorted(group, key=lambda p: target.index[p][dim])
        if [target.index[p][dim] % size for p in by_tile] != list(range(size)):
            return None
        if any(target.index[p][dim] // size != current.index[p][dim] for p in group):
            return None
        for p in group:
            if any(target.index[p][d] != current.index[p][d] for d in range(current.rank) if d != dim):
                return None
        ordered.append(by_tile)
    return dim, ordered


def finish_cost(shape, element, current: Tiling, groups: list[list[int]], target: Tiling) -> float:
    size = len(groups[0])
    if target.partial is not None:
        if current.partial is None and summands_are_labels(current, groups, target):
            return cost(shape, element, current.with_partial(target.partial), target)
        return finish_cost(shape, element, current, groups, target.with_partial(None))
    buffer = byte_size(current.shard_shape(shape), element)
    if scatter_dim(current, groups, target, shape) is not None:
        return buffer * (size - 1) / size
    return 2 * buffer * (size - 1) / size + cost(shape, element, current, target)

