"""Sharded arrays, as IFRT has them (`xla/python/ifrt/array.h`, `sharding.h`; what jax.Array
is built on): an `Array` is a `Sharding` plus one buffer per device, matched by index, and an
executable for several devices takes and returns Arrays.

    mesh = {"x": 2, "y": 4}
    a = Array.from_numpy(x, Sharding.named(mesh, ("x", "y"), client.devices()))
    [out] = executable.execute([a, b])          # every device's shards at once
    out.to_numpy()                              # gathered on the host

A `Sharding` is a tuple of devices and an HloSharding whose tile assignment names positions
in that tuple (IFRT's HloSharding over a DeviceList). It is built from mesh axes and a spec
naming the axes that split each dimension (jax's NamedSharding, converted as Shardy's
shardings are, `dialects/xhlo/mesh_sharding.py`), replicated, or from XLA's text. For a
global shape it gives each device's index (slices) and the shard shape. Every shard has the
same shape: a dimension its tiles do not divide is padded, as XLA's SPMD partitioner pads it
(each device holds ceil(n/k) of it, the last tiles ending in padding; a tile may be all
padding), so a device's buffer is the executable's parameter, as in XLA, where the padded
shard is the parameter's shape (jax's `device_put` refuses such shardings; this API takes
them). Shardings that say nothing of how an array is split (manual, maximal, tuple) are
refused. An unreduced sharding (`last_tile_dims={unreduced}`) says each device along the
subgroup holds a partial sum: `from_numpy` puts the value on the first of them and zeros on
the others, `to_numpy` adds their parts up.

`Array.from_numpy` splits on the host (a shard that is a contiguous part of the caller's
array is a read-only view of it, as `Client.buffer_from_pyval` makes; a padded shard is a
copy, zero in its padding); `to_numpy` assembles, each index from the first device holding
it, the padding left out.

An executable for several devices knows its entry as its caller sees it: the partitioners
record the global shapes and shardings (`xhlo.global_entry`), which the plan keeps; over the
executable's devices, in flattened-id order, device `r * partitions + p` holds partition
p's shard (replicas hold the same shards). A program for several devices that no
partitioner rewrote (written per device) takes every argument whole on every device.
Execute checks each argument's placement against the executable's and refuses a different
one in one line, naming both: like jax's AOT-compiled executables, and unlike `jax.jit`,
nothing is resharded behind the caller's back (on the host that is a gather and a split of
the whole array, more than most programs cost); `Array.reshard` does it when asked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mlirxla.dialects.xhlo.mesh_sharding import DeviceMesh, MeshSharding, to_hlo
from mlirxla.dialects.xhlo.sharding import HloSharding, ShardingSyntaxError
from mlirxla.errors import MlirxlaError
from mlirxla.transforms.spmd_tiling import Tiling

from .buffers import Buffer
from .devices import DeviceGrid, DeviceRun, execute_on_devices

Index = tuple[slice, ...]


@dataclass(frozen=True, repr=False)
class Sharding:
    """Devices, and an HloSharding over their positions (module docstring)."""

    devices: tuple
    hlo: HloSharding

    def __post_init__(self):
        object.__setattr__(self, "devices", tuple(self.devices))
        if problem := self.problem():
            raise MlirxlaError(problem)

    def problem(self) -> str | None:
        ids = [device.id for device in self.devices]
        if not ids:
            return "a sharding needs at least one device"
        if len(set(ids)) != len(ids):
            return f"a sharding's devices must be distinct: device {next(i for i in ids if ids.count(i) > 1)} appears twice"
        hlo = self.hlo
        if hlo.kind == "replicated":
            return None
        if hlo.kind == "maximal":
            return f"{hlo} puts an array on one device: use Sharding.replicated([device])"
        if hlo.kind != "tiled":
            return f"an array cannot be sharded {hlo}: it does not say which part of the array each device holds"
        if set(hlo.subgroup_types) - {"unreduced", "replicated"}:
            return f"an array cannot be sharded {hlo}: only replicated and unreduced last tile dimensions say what each device holds"
        if problem := hlo.problem(device_count=len(ids)):
            return problem
        if hlo.devices().size != len(ids):
            return f"the sharding {hlo} places tiles on {hlo.devices().size} devices, but {len(ids)} are given"
        return None

    # ------------------------------------------------------------ constructors

    @staticmethod
    def named(mesh_shape: dict[str, int], spec, devices) -> "Sharding":
        """Over `devices` laid out row-major as a mesh of `mesh_shape` (axis name -> size, major
        to minor): dimension i of an array is split by the axes `spec[i]` names (None, an
        axis, or a tuple of axes, major to minor); axes no dimension names replicate."""
        devices = tuple(devices)
        if isinstance(spec, str) or not isinstance(mesh_shape, dict):
            raise MlirxlaError("Sharding.named takes the mesh as {axis: size} and the spec as a tuple with one entry per dimension")
        sizes = list(mesh_shape.items())
        if any(not isinstance(size, int) or size < 1 for _, size in sizes):
            raise MlirxlaError(f"mesh axis sizes must be positive integers: {mesh_shape}")
        total = int(np.prod([size for _, size in sizes], dtype=np.int64))
        if total != len(devices):
            raise MlirxlaError(f"the mesh {mesh_shape} has {total} devices, but {len(devices)} are given")
        mesh = DeviceMesh.of(sizes)
        used: set[str] = set()
        dims = []
        for entry in spec:
            names = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
            for name in names:
                if name not in mesh_shape:
                    raise MlirxlaError(f"the spec {tuple(spec)} names axis {name!r}, which the mesh {mesh_shape} does not have")
                if name in used:
                    raise MlirxlaError(f"the spec {tuple(spec)} uses axis {name!r} twice")
                used.add(name)
            dims.append(tuple(index for name in names for index, axis in enumerate(mesh.axes) if axis.name == name))
        return Sharding(devices, to_hlo(MeshSharding(tuple(dims)), mesh))

    @staticmethod
    def replicated(devices) -> "Sharding":
        """Every device holds the whole array."""
        return Sharding(tuple(devices), HloSharding.replicated())

    @staticmethod
    def from_hlo(sharding: str | HloSharding, devices) -> "Sharding":
        """From XLA's text (`{devices=[2,1,4]<=[8] last_tile_dim_replicate}`), its device ids
        being positions in `devices`."""
        if isinstance(sharding, str):
            try:
                sharding = HloSharding.parse(sharding)
            except ShardingSyntaxError as error:
                raise MlirxlaError(str(error)) from None
        return Sharding(tuple(devices), sharding)

    # ------------------------------------------------------------ queries

    def is_fully_replicated(self) -> bool:
        return self.hlo.kind == "replicated" or (all(t == 1 for t in self.hlo.tile_dims[:self.hlo.data_rank])
                                                  and not self.is_unreduced())

    def is_unreduced(self) -> bool:
        """Whether the devices hold partial sums of the array (an `unreduced` subgroup)."""
        return "unreduced" in self.hlo.subgroup_types

    def tiling(self, shape) -> Tiling:
        """Per device, its tile index along each dimension of an array of `shape`."""
        shape = tuple(shape)
        if self.hlo.kind == "tiled" and self.hlo.data_rank != len(shape):
            raise MlirxlaError(f"the sharding {self.hlo} splits {self.hlo.data_rank} dimension(s), but the array has shape {list(shape)}")
        return Tiling.from_hlo(self.hlo, len(shape), len(self.devices))

    def shard_shape(self, shape) -> tuple[int, ...]:
        """Every device's buffer shape (padded where the tiles do not divide the array)."""
        return tuple(self.tiling(shape).shard_shape(shape))

    def indices(self, shape) -> list[Index]:
        """Per device (in `devices` order), the part of an array of `shape` it holds: its
        tile without the padding, empty for a tile that is all padding."""
        tiling = self.tiling(shape)
        sizes = tiling.shard_shape(shape)
        return [tuple(slice(min(i * s, n), min((i + 1) * s, n)) for i, s, n in zip(vector, sizes, shape)) for vector in tiling.index]

    def labels(self, shape) -> list[int]:
        """Per device, which of the partial sums of an unreduced array it holds (all 0 for an
        array that is not unreduced)."""
        tiling = self.tiling(shape)
        return [tiling.label(p) for p in range(len(self.devices))]

    def placement(self, shape) -> dict[int, tuple]:
        """Device id -> the (start, stop) per dimension it holds, and which partial sum."""
        return {device.id: tuple((s.start, s.stop) for s in index) + (label,)
                for device, index, label in zip(self.devices, self.indices(shape), self.labels(shape))}

    def is_equivalent_to(self, other: "Sharding", shape) -> bool:
        """Whether both put the same part of an array of `shape` on the same devices."""
        return self.placement(shape) == other.placement(shape)

    def __str__(self) -> str:
        ids = [device.id for device in self.devices]
        over = f"devices {ids[0]}-{ids[-1]}" if ids == list(range(ids[0], ids[0] + len(ids))) and len(ids) > 1 else f"devices {ids}"
        return f"{self.hlo} over {over}"

    def __repr__(self) -> str:
        return f"Sharding({self})"


@dataclass(frozen=True)
class Shard:
    """One device's part of an Array: where it sits in the global array, and its buffer."""

    device: object
    index: Index
    buffer: object


class Array:
    """A global array held as one buffer per device of its sharding (module docstring)."""

    def __init__(self, shape, dtype, sharding: Sharding, buffers: list):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.sharding = sharding
        self._buffers = list(buffers)
        self._deleted = False

    @staticmethod
    def from_numpy(value, sharding: Sharding) -> "Array":
        """Split `value` into each device's shard of `sharding` (unreduced: the devices of
        partial sum 0 hold it, the others zeros)."""
        array = np.asarray(value)
        shard_shape = sharding.shard_shape(array.shape)
        labels = sharding.labels(array.shape)
        buffers = [device.client.buffer_from_pyval(padded(array[index] if label == 0 else np.zeros_like(array[index]), shard_shape), device)
                   for device, index, label in zip(sharding.devices, sharding.indices(array.shape), labels)]
        return Array(array.shape, array.dtype, sharding, buffers)

    @property
    def addressable_shards(self) -> list[Shard]:
        indices = self.sharding.indices(self.shape)
        return [Shard(device, index, buffer) for device, index, buffer in zip(self.sharding.devices, indices, self.buffers())]

    def buffers(self) -> list:
        """The buffers, in the order of the sharding's devices."""
        if self._deleted:
            raise MlirxlaError("the array was deleted (donated or deleted explicitly)")
        return list(self._buffers)

    def to_numpy(self) -> np.ndarray:
        """The global array, each part taken from the first device holding it (unreduced: the
        partial sums added up)."""
        buffers = self.buffers()
        if self.sharding.is_fully_replicated():
            return buffers[0].to_numpy()
        labels = self.sharding.labels(self.shape)
        parts = {label: np.empty(self.shape, self.dtype) for label in sorted(set(labels))}
        seen = set()
        for index, buffer, label in zip(self.sharding.indices(self.shape), buffers, labels):
            key = tuple((s.start, s.stop) for s in index) + (label,)
            if key not in seen:
                parts[label][index] = buffer.to_numpy()[tuple(slice(0, s.stop - s.start) for s in index)]
                seen.add(key)
        stacked = np.stack(list(parts.values()))
        return stacked.any(axis=0) if self.dtype == np.bool_ else stacked.sum(axis=0, dtype=self.dtype)

    def reshard(self, sharding: Sharding) -> "Array":
        """The same values placed by `sharding`, gathered and split again on the host."""
        return Array.from_numpy(self.to_numpy(), sharding)

    def delete(self) -> None:
        for buffer in self._buffers:
            buffer.delete()
        self._deleted = True

    def is_deleted(self) -> bool:
        return self._deleted

    def __repr__(self) -> str:
        state = ", deleted" if self._deleted else ""
        return f"Array({self.dtype}{list(self.shape)}, {self.sharding}{state})"


def padded(part: np.ndarray, shape) -> np.ndarray:
    """`part` zero-padded at the high end of each dim to `shape` (itself when it has it)."""
    if part.shape == tuple(shape):
        return part
    out = np.zeros(shape, part.dtype)
    out[tuple(slice(0, n) for n in part.shape)] = part
    return out


# ---------------------------------------------------------------- executing


@dataclass(frozen=True)
class ArraySpec:
    """A parameter or output of a program for several devices, as its Arrays are."""

    shape: tuple[int, ...]
    dtype: np.dtype
    sharding: Sharding


def global_signature(plan, devices: list) -> tuple[list[ArraySpec], list[ArraySpec]]:
    """(parameters, outputs) of `plan` over `devices` (its grid's, by flattened id)."""
    grid = DeviceGrid(plan.replica_count, plan.partition_count)
    local_outputs = [spec for _, spec in plan.outputs]

    def values(recorded, local) -> list[ArraySpec]:
        if not recorded:  # written per device: every device takes the whole value
            return [ArraySpec(tuple(spec.shape), np.dtype(spec.dtype), Sharding.replicated(devices)) for spec in local]
        return [ArraySpec(value.shape, np.dtype(spec.dtype), Sharding(devices, over_replicas(HloSharding.parse(value.sharding), grid)))
                for value, spec in zip(recorded, local)]

    return values(plan.global_parameters, plan.parameters), values(plan.global_outputs, local_outputs)


def over_replicas(hlo: HloSharding, grid: DeviceGrid) -> HloSharding:
    """`hlo` (over partitions) over every device of `grid`: device `r * partitions + p` holds
    partition p's tile. A maximal sharding is computed everywhere, as the partitioner does."""
    if hlo.kind in ("maximal", "unknown"):
        return HloSharding.replicated()
    if grid.replica_count == 1 or hlo.kind != "tiled":
        return hlo
    partitions = hlo.devices().reshape(hlo.tile_dims)
    stacked = np.stack([partitions + r * grid.partition_count for r in range(grid.replica_count)], axis=-1)
    if hlo.last_tile_dim_replicate:
        stacked = stacked.reshape(*hlo.tile_dims[:-1], hlo.tile_dims[-1] * grid.replica_count)
    return HloSharding.tiled(stacked.shape, devices=stacked.reshape(-1), last_tile_dim_replicate=True)


def execute(loaded, arguments, donate: tuple[int, ...] = ()) -> list[Array]:
    """Run `loaded` (a LoadedExecutable for several devices) on Arrays: every device's shards
    at once; the outputs as Arrays sharded as the program's results are."""
    parameters, outputs = loaded.global_signature
    devices = loaded.devices
    if len(arguments) != len(parameters):
        raise MlirxlaError(f"the executable takes {len(parameters)} argument(s), got {len(arguments)}")
    position = {device.id: d for d, device in enumerate(devices)}
    per_device = [[None] * len(parameters) for _ in devices]
    for i, (argument, expected) in enumerate(zip(arguments, parameters)):
        if not isinstance(argument, Array):
            raise MlirxlaError(f"argument {i} is a {type(argument).__name__}: a program for {len(devices)} devices takes Arrays "
                               f"(Array.from_numpy(x, executable.parameter_shardings[{i}]))")
        if argument.shape != expected.shape or argument.dtype != expected.dtype:
            raise MlirxlaError(f"argument {i}: expected {expected.dtype}{list(expected.shape)}, got {argument.dtype}{list(argument.shape)}")
        if not argument.sharding.is_equivalent_to(expected.sharding, expected.shape):
            raise MlirxlaError(f"argument {i} is sharded {argument.sharding}, but the executable takes {expected.sharding} "
                               f"(array.reshard(executable.parameter_shardings[{i}]))")
        for device, buffer in zip(argument.sharding.devices, argument.buffers()):
            per_device[position[device.id]][i] = buffer.to_numpy()
    grid = DeviceGrid(loaded.executable.plan.replica_count, loaded.executable.plan.partition_count)
    run = DeviceRun(loaded.executable, frozenset(donate))
    results = execute_on_devices([run] * len(devices), per_device, grid)
    for index in donate:
        arguments[index].delete()
    return [Array(value.shape, value.dtype, value.sharding, [Buffer(results[d][j], device) for d, device in enumerate(devices)])
            for j, value in enumerate(outputs)]


def execute_numpy(loaded, arguments) -> list[np.ndarray]:
    """`execute` on global numpy arrays, split by the executable's parameter shardings; the
    global outputs."""
    parameters, _ = loaded.global_signature
    if len(arguments) != len(parameters):
        raise MlirxlaError(f"the executable takes {len(parameters)} argument(s), got {len(arguments)}")
    arrays = [Array.from_numpy(np.asarray(argument), value.sharding) for argument, value in zip(arguments, parameters)]
    return [array.to_numpy() for array in execute(loaded, arrays)]
