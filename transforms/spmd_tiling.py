"""Which tile of a sharded value each partition holds: the partitioner's view of a sharding.

An `xhlo.sharding` (XLA's HloSharding) is a tile assignment: partition ids laid out in an
array with one dimension per data dimension (plus the replication subgroup). The partitioner
only ever asks what that array answers: per partition, the tile index along each dimension.
`Tiling` keeps exactly that (tile counts, and per partition an index vector), because the
partitioner composes tilings that no single HloSharding prints: a dot's iteration space is
the result's tiling next to the contracting dims' tiling, and an operand's target is a
restriction of it. A tiling is *valid* when every combination of indices is held by the same
number of partitions (its replication count); only valid tilings are partitioned.

Collective groups follow from the indices (XLA's `GetPartitionGroupsForReplication` and
friends): `groups_over(dims)` is the partitions that hold the same tile on every other
dimension, one member per index combination of `dims`, ordered by that combination
(row-major), so that an all-gather's or all-to-all's concatenation order is the tile order.
Replicas of one tile are dealt to separate groups by their rank among partitions holding it.

An *unreduced* value (an `unreduced` subgroup in its HloSharding, Shardy's `unreduced={"y"}`)
is held as partial sums: `partial` gives each partition its place in the unreduced subgroup,
its *label*, and the value is the sum, over the labels, of the tiles the partitions holding
each label have. Partitions with the same tile and label hold the same summand, so moving
tiles between partitions of one label keeps a partial value partial: groups never mix labels.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from mlirxla.dialects.xhlo.sharding import HloSharding


@dataclass(frozen=True)
class Tiling:
    """Tile counts per dimension, and per partition its tile index per dimension."""

    tiles: tuple[int, ...]
    index: tuple[tuple[int, ...], ...]
    partial: tuple[int, ...] | None = None

    @staticmethod
    def replicated(rank: int, partitions: int) -> "Tiling":
        return Tiling(tuple(1 for _ in range(rank)), tuple(tuple(0 for _ in range(rank)) for _ in range(partitions)))

    @staticmethod
    def from_hlo(hlo: HloSharding, rank: int, partitions: int) -> "Tiling | None":
        """The tiling of an HloSharding on a value of rank `rank`; None for a manual one.
        A maximal sharding is computed everywhere (replicated): correct, and every device
        holds the value anyway once it is used."""
        if hlo.kind in ("replicated", "maximal", "unknown"):
            return Tiling.replicated(rank, partitions)
        if hlo.kind != "tiled" or "manual" in hlo.subgroup_types:
            return None
        devices = hlo.devices().reshape(hlo.tile_dims)
        tiles = tuple(int(t) for t in hlo.tile_dims[:rank])
        unreduced = rank + hlo.subgroup_types.index("unreduced") if "unreduced" in hlo.subgroup_types else None
        index, labels = [None] * partitions, [0] * partitions
        for position in itertools.product(*(range(t) for t in hlo.tile_dims)):
            index[int(devices[position])] = tuple(int(i) for i in position[:rank])
            if unreduced is not None:
                labels[int(devices[position])] = int(position[unreduced])
        if any(i is None for i in index):
            return None
        return Tiling(tiles, tuple(index), None if unreduced is None else tuple(labels))

    # ------------------------------------------------------------ queries

    @property
    def rank(self) -> int:
        return len(self.tiles)

    @property
    def partitions(self) -> int:
        return len(self.index)

    def is_replicated(self) -> bool:
        return all(t == 1 for t in self.tiles)

    def label(self, partition: int) -> int:
        """The partition's place in the unreduced subgroup (0 for a value that is not partial)."""
        return 0 if self.partial is None else self.partial[partition]

    def keys(self) -> list[tuple]:
        """Per partition, what it holds: its tile index and its label."""
        return [vector + (self.label(p),) for p, vector in enumerate(self.index)]

    def valid(self) -> bool:
        """Every index combination (and label) held by the same number of partitions."""
        combinations = int(np.prod(self.tiles, dtype=np.int64)) if self.tiles else 1
        combinations *= len(set(self.partial)) if self.partial is not None else 1
        if self.partitions % combinations:
            return False
        counts: dict[tuple[int, ...], int] = {}
        for key in self.keys():
            counts[key] = counts.get(key, 0) + 1
        return len(counts) == combinations and len(set(counts.values())) == 1

    def shard_shape(self, shape) -> list[int]:
        """One tile's shape: ceil(n/k) per dim, padded where k does not divide n."""
        return [-(-n // t) for n, t in zip(shape, self.tiles)]

    def uneven_dim(self, shape) -> int | None:
        """The first dimension the tiles do not divide (windowed ops exchange halos only
        between even tiles)."""
        return next((d for d, (n, t) in enumerate(zip(shape, self.tiles)) if n % t), None)

    def offsets(self, shape, dim: int) -> list[int]:
        """Per partition, where its tile of `dim` starts."""
        size = self.shard_shape(shape)[dim]
        return [vector[dim] * size for vector in self.index]

    def same_placement(self, other: "Tiling") -> bool:
        return self.tiles == other.tiles and self.index == other.index and self.partial == other.partial

    # ------------------------------------------------------------ derived tilings

    def restrict(self, dims) -> "Tiling":
        """The tiling of a value whose dimension i is this tiling's dimension dims[i]
        (None: a dimension kept whole)."""
        tiles = tuple(1 if d is None else self.tiles[d] for d in dims)
        index = tuple(tuple(0 if d is None else vector[d] for d in dims) for vector in self.index)
        return Tiling(tiles, index, self.partial)

    def without(self, dims) -> "Tiling":
        """The tiling once `dims` are whole (gathered) on every partition."""
        dims = set(dims)
        tiles = tuple(1 if d in dims else t for d, t in enumerate(self.tiles))
        index = tuple(tuple(0 if d in dims else i for d, i in enumerate(vector)) for vector in self.index)
        return Tiling(tiles, index, self.partial)

    def concat(self, other: "Tiling") -> "Tiling":
        """This tiling's dims followed by `other`'s, each partition's indices side by side
        (partial as this tiling is)."""
        return Tiling(self.tiles + other.tiles, tuple(a + b for a, b in zip(self.index, other.index)), self.partial)

    def with_partial(self, partial: tuple[int, ...] | None) -> "Tiling":
        return Tiling(self.tiles, self.index, partial)

    def holds_every_label(self, partial: tuple[int, ...]) -> bool:
        """Whether, labelled by `partial`, the holders of each tile have every label equally
        often (a partial value tiled so can be summed tile by tile)."""
        labels = sorted(set(partial))
        counts: dict[tuple, list[int]] = {}
        for partition, vector in enumerate(self.index):
            counts.setdefault(vector, [0] * (max(labels) + 1))[partial[partition]] += 1
        return all(len({row[label] for label in labels}) == 1 and row[labels[0]] > 0 for row in counts.values())

    def summand_groups(self) -> list[list[int]]:
        """Groups of partitions holding one tile, one member per label: the partial sums an
        all-reduce over each group totals."""
        holders: dict[tuple, dict[int, list[int]]] = {}
        for partition, vector in enumerate(self.index):
            holders.setdefault(vector, {}).setdefault(self.label(partition), []).append(partition)
        groups = []
        for vector in sorted(holders):
            by_label = holders[vector]
            for rank in range(min(len(members) for members in by_label.values())):
                groups.append([by_label[label][rank] for label in sorted(by_label)])
        return groups

    # ------------------------------------------------------------ groups

    def groups_over(self, dims) -> list[list[int]] | None:
        """Partition groups across `dims` (module docstring), or None when the partitions
        holding each tile are not equally many (an invalid tiling)."""
        dims = list(dims)
        others = [d for d in range(self.rank) if d not in dims]
        buckets: dict[tuple, dict[tuple, list[int]]] = {}
        for partition, vector in enumerate(self.index):
            key = tuple(vector[d] for d in others) + (self.label(partition),)
            inner = tuple(vector[d] for d in dims)
            buckets.setdefault(key, {}).setdefault(inner, []).append(partition)
        combinations = list(itertools.product(*(range(self.tiles[d]) for d in dims)))
        groups = []
        for key in sorted(buckets):
            members = buckets[key]
            sizes = {len(members.get(c, [])) for c in combinations}
            if len(sizes) != 1 or 0 in sizes:
                return None
            for rank in range(sizes.pop()):
                groups.append([members[c][rank] for c in combinations])
        return groups
