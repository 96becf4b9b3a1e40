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
        index = [None] * partitions
        for position in itertools.product(*(range(t) for t in hlo.tile_dims)):
            index[int(devices[position])] = tuple(int(i) for i in position[:rank])
        if any(i is None for i in index):
            return None
        return Tiling(tiles, tuple(index))

    # ------------------------------------------------------------ queries

    @property
    def rank(self) -> int:
        return len(self.tiles)

    @property
    def partitions(self) -> int:
        return len(self.index)

    def is_replicated(self) -> bool:
        return all(t == 1 for t in self.tiles)

    def valid(self) -> bool:
        """Every index combination held by the same number of partitions."""
        combinations = int(np.prod(self.tiles, dtype=np.int64)) if self.tiles else 1
        if self.partitions % combinations:
            return False
        counts: dict[tuple[int, ...], int] = {}
        for vector in self.index:
            counts[vector] = counts.get(vector, 0) + 1
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
        return self.tiles == other.tiles and self.index == other.index

    # ------------------------------------------------------------ derived tilings

    def restrict(self, dims) -> "Tiling":
        """The tiling of a value whose dimension i is this tiling's dimension dims[i]
        (None: a dimension kept whole)."""
        tiles = tuple(1 if d is None else self.tiles[d] for d in dims)
        index = tuple(tuple(0 if d is None else vector[d] for d in dims) for vector in self.index)
        return Tiling(tiles, index)

    def without(self, dims) -> "Tiling":
        """The tiling once `dims` are whole (gathered) on every partition."""
        dims = set(dims)
        tiles = tuple(1 if d in dims else t for d, t in enumerate(self.tiles))
        index = tuple(tuple(0 if d in dims else i for d, i in enumerate(vector)) for vector in self.index)
        return Tiling(tiles, index)

    def concat(self, other: "Tiling") -> "Tiling":
        """This tiling's dims followed by `other`'s, each partition's indices side by side."""
        return Tiling(self.tiles + other.tiles, tuple(a + b for a, b in zip(self.index, other.index)))

    # ------------------------------------------------------------ groups

    def groups_over(self, dims) -> list[list[int]] | None:
        """Partition groups across `dims` (module docstring), or None when the partitions
        holding each tile are not equally many (an invalid tiling)."""
        dims = list(dims)
        others = [d for d in range(self.rank) if d not in dims]
        buckets: dict[tuple, dict[tuple, list[int]]] = {}
        for partition, vector in enumerate(self.index):
            key = tuple(vector[d] for d in others)
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
