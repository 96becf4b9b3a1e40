"""A sharding as mesh axes per tensor dimension (Shardy's model), and its HloSharding form.

`xhlo.sharding` holds XLA's HloSharding text: a tile assignment over device ids. Propagation
reasons in Shardy's terms instead: a tensor dimension is sharded by a list of mesh axes,
major to minor, and a sharding that a dimension cannot take splits or merges along axes.
`DeviceMesh` holds the axes; every axis is *prime* (an sdy axis "x"=4 is two axes of size 2,
the sub-axes "x":(1)2 and "x":(2)2), so splitting a sharded dimension in a reshape is always
a split of the axis list, and two shardings overlap exactly when they share an axis index.
Printing groups an axis's consecutive primes back into Shardy's names (`{"x"}`,
`{"x":(2)2}`).

`to_hlo` is exact: the device array (the mesh's devices shaped by the prime axes) transposed
so that dimension 0's axes come first, then dimension 1's, ..., then manual axes, then the
rest (the replicated subgroup), as the front door converts `sdy.sharding` and as XLA exports
Shardy (an `unreduced` subgroup between the manual and the replicated axes). `from_hlo`
inverts it by searching the orders of the prime axes for one whose
transposed device array is the tile assignment, so explicit device lists convert as well as
iota ones; a tile assignment no order of the axes produces has no mesh form (None).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from mlirxla.mlir import ir

from .sharding import HloSharding, Iota

# Above this many prime axes `from_hlo` stops searching orders (8! orders); larger meshes
# convert only shardings whose iota order is the mesh's own.
MAX_SEARCHED_AXES = 8


def prime_factors(n: int) -> list[int]:
    factors, p = [], 2
    while n > 1 and p * p <= n:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    if n > 1:
        factors.append(n)
    return factors


@dataclass(frozen=True)
class MeshAxis:
    """A prime axis: the part of named axis `name` from `pre` (the product of the sizes before
    it within that axis) of size `size`."""

    name: str
    pre: int
    size: int


@dataclass(frozen=True)
class DeviceMesh:
    """Prime axes, major to minor, the named axes' full sizes, and the device ids (row-major)."""

    axes: tuple[MeshAxis, ...]
    named_sizes: tuple[tuple[str, int], ...]
    devices: tuple[int, ...]

    @staticmethod
    def of(named_axes, devices=None) -> "DeviceMesh":
        """From named axes [(name, size), ...] (an sdy mesh) and device ids (None: iota)."""
        axes = []
        for name, size in named_axes:
            pre = 1
            for prime in prime_factors(size):
                axes.append(MeshAxis(name, pre, prime))
                pre *= prime
        total = int(np.prod([s for _, s in named_axes], dtype=np.int64)) if named_axes else 1
        device_ids = tuple(range(total)) if devices is None else tuple(int(d) for d in devices)
        return DeviceMesh(tuple(axes), tuple((n, int(s)) for n, s in named_axes), device_ids)

    @property
    def size(self) -> int:
        return len(self.devices)

    def axis_size(self, axes) -> int:
        return int(np.prod([self.axes[a].size for a in axes], dtype=np.int64)) if axes else 1

    def device_array(self) -> np.ndarray:
        shape = [a.size for a in self.axes] or [1]
        return np.array(self.devices, dtype=np.int64).reshape(shape)

    def is_iota(self) -> bool:
        return list(self.devices) == list(range(len(self.devices)))

    def axes_text(self, axes) -> str:
        """Shardy's spelling of an axis list: primes of one named axis merged, `"x":(pre)size`
        for a part of an axis."""
        parts, index = [], 0
        axes = list(axes)
        while index < len(axes):
            first = self.axes[axes[index]]
            size, end = first.size, index + 1
            while end < len(axes) and axes[end] == axes[end - 1] + 1 and self.axes[axes[end]].name == first.name:
                size *= self.axes[axes[end]].size
                end += 1
            full = dict(self.named_sizes)[first.name]
            parts.append(f'"{first.name}"' if first.pre == 1 and size == full else f'"{first.name}":({first.pre}){size}')
            index = end
        return ", ".join(parts)

    def __str__(self) -> str:
        text = "[" + ", ".join(f'"{n}"={s}' for n, s in self.named_sizes) + "]"
        return text if self.is_iota() else f"{text}, device_ids={list(self.devices)}"


@dataclass(frozen=True)
class MeshSharding:
    """Mesh axes per tensor dimension (indices into `DeviceMesh.axes`, major to minor); the
    axes a value is manual on (inside `shard_map`); the axes it is a partial sum over
    (`unreduced`, what a contracting dimension sharded on the operands leaves on a dot's result
    before the all-reduce). Axes used nowhere are replicated."""

    dims: tuple[tuple[int, ...], ...]
    manual: tuple[int, ...] = ()
    unreduced: tuple[int, ...] = field(default=())

    @staticmethod
    def replicated(rank: int) -> "MeshSharding":
        return MeshSharding(tuple(() for _ in range(rank)))

    def used(self) -> set[int]:
        return {a for axes in self.dims for a in axes} | set(self.manual)

    def is_replicated(self) -> bool:
        return not any(self.dims) and not self.manual

    def text(self, mesh: DeviceMesh) -> str:
        dims = ", ".join("{" + mesh.axes_text(axes) + "}" for axes in self.dims)
        extra = ""
        if self.manual:
            extra += ", manual={" + mesh.axes_text(self.manual) + "}"
        if self.unreduced:
            extra += ", unreduced={" + mesh.axes_text(self.unreduced) + "}"
        return f"[{dims}]{extra}"


def to_hlo(sharding: MeshSharding, mesh: DeviceMesh) -> HloSharding:
    """The HloSharding of a mesh sharding (module docstring)."""
    used = [a for axes in sharding.dims for a in axes]
    manual = [a for a in sharding.manual if a not in used]
    rest = [a for a in range(len(mesh.axes)) if a not in used and a not in manual]
    tile_dims = [mesh.axis_size(axes) for axes in sharding.dims]
    sizes = [a.size for a in mesh.axes]
    return tiled_over_axes(tile_dims, sizes, used, manual, rest, None if mesh.is_iota() else mesh.device_array().reshape(-1))


def tiled_over_axes(tile_dims: list[int], sizes: list[int], used: list[int], manual: list[int], rest: list[int],
                    device_ids=None, unreduced: list[int] = ()) -> HloSharding:
    """The HloSharding whose data dims take `tile_dims` from the mesh axes `used` (in order),
    the `manual` axes forming a manual subgroup, the `unreduced` axes an unreduced one (the
    devices along it hold partial sums of the value) and the `rest` a replicated one, over a
    mesh of axis `sizes` whose devices are `device_ids` in row-major order (None: 0..n-1, an
    iota)."""
    def product(axes) -> int:
        return int(np.prod([sizes[a] for a in axes], dtype=np.int64))

    unreduced = [a for a in unreduced if a not in used and a not in manual]
    rest = [a for a in rest if a not in unreduced]
    manual_size, unreduced_size, rest_size = product(manual), product(unreduced), product(rest)
    data_size = int(np.prod(tile_dims, dtype=np.int64)) if tile_dims else 1
    if data_size == 1 and manual_size == 1 and unreduced_size == 1:
        return HloSharding.replicated()
    if data_size == 1 and rest_size == 1 and unreduced_size == 1:
        return HloSharding.manual()
    tile_dims, subgroups = list(tile_dims), []
    for size, kind in ((manual_size, "manual"), (unreduced_size, "unreduced"), (rest_size, "replicated")):
        if size > 1:
            tile_dims.append(size)
            subgroups.append(kind)
    perm = list(used) + list(manual) + list(unreduced) + list(rest)
    if device_ids is None or list(device_ids) == list(range(product(range(len(sizes))))):
        return HloSharding.tiled(tile_dims, iota=Iota(tuple(sizes), tuple(perm)), subgroup_types=subgroups)
    devices = np.array(device_ids, dtype=np.int64).reshape(sizes).transpose(perm).reshape(-1)
    return HloSharding.tiled(tile_dims, devices=[int(d) for d in devices], subgroup_types=subgroups)


def _split(order: tuple[int, ...], sizes: list[int], mesh: DeviceMesh) -> list[tuple[int, ...]] | None:
    """`order` cut into consecutive groups whose axis sizes multiply to `sizes`."""
    groups, index = [], 0
    for size in sizes:
        group, product = [], 1
        while product < size and index < len(order):
            product *= mesh.axes[order[index]].size
            group.append(order[index])
            index += 1
        if product != size:
            return None
        groups.append(tuple(group))
    return groups if index == len(order) else None


def from_hlo(hlo: HloSharding, mesh: DeviceMesh, rank: int) -> MeshSharding | None:
    """The mesh sharding of an HloSharding of a value of rank `rank`; None when the tile
    assignment is no transpose of the mesh's devices (or the sharding is maximal, a tuple)."""
    if hlo.kind == "replicated":
        return MeshSharding.replicated(rank)
    if hlo.kind == "manual":
        return MeshSharding(tuple(() for _ in range(rank)), tuple(range(len(mesh.axes))))
    if hlo.kind != "tiled" or hlo.data_rank != rank or int(np.prod(hlo.tile_dims)) != mesh.size:
        return None
    if any(t not in ("manual", "unreduced", "replicated") for t in hlo.subgroup_types):
        return None
    target = hlo.devices()
    sizes = list(hlo.tile_dims)
    devices = mesh.device_array()
    count = len(mesh.axes)
    orders = [tuple(range(count))] if count > MAX_SEARCHED_AXES else itertools.permutations(range(count))
    for order in orders:
        groups = _split(tuple(order), sizes, mesh)
        if groups is None:
            continue
        if not np.array_equal(devices.transpose(order).reshape(-1), target):
            continue
        dims = tuple(groups[:rank])
        manual = groups[rank + hlo.subgroup_types.index("manual")] if "manual" in hlo.subgroup_types else ()
        unreduced = groups[rank + hlo.subgroup_types.index("unreduced")] if "unreduced" in hlo.subgroup_types else ()
        return MeshSharding(dims, tuple(manual), tuple(unreduced))
    return None


def meshes_of(attributes) -> dict[str, DeviceMesh]:
    """The meshes the front door recorded (`xhlo.meshes` of the module's attributes)."""
    if "xhlo.meshes" not in attributes:
        return {}
    meshes = {}
    for entry in ir.DictAttr(attributes["xhlo.meshes"]):
        fields = ir.DictAttr(entry.attr)
        names = [ir.StringAttr(n).value for n in ir.ArrayAttr(fields["axis_names"])]
        sizes = list(ir.DenseI64ArrayAttr(fields["axis_sizes"]))
        devices = list(ir.DenseI64ArrayAttr(fields["device_ids"])) if "device_ids" in fields else None
        meshes[entry.name] = DeviceMesh.of(list(zip(names, sizes)), devices)
    return meshes
