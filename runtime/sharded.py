"""Run a sharded program on global arrays: each device gets its shard of every argument, and
the outputs are assembled from the devices' shards (what IFRT's sharded arrays do for jax;
the Python API's `Array.from_numpy(x, sharding)` will build on `split` and `assemble`).

The shardings are the entry's after propagation (arguments as the user wrote them, results
as propagation leaves them), read from a propagated clone of the module, because the compiled
program keeps only local shapes. Partition p of replica r is device `r * partitions + p`
(the flattened id); replicas hold the same shards.
"""

from __future__ import annotations

import itertools

import numpy as np

from mlirxla.backends import registry
from mlirxla.dialects.xhlo.config import read_config
from mlirxla.dialects.xhlo.sharding import HloSharding, parse_attribute
from mlirxla.ir_queries import entry_function, public_entry_name
from mlirxla.mlir import ir

from .devices import execute_on_devices
from .driver import compile_entry, module_grid


def tile_slices(sharding: HloSharding, shape, partitions: int) -> list[tuple[slice, ...]]:
    """Per partition, the part of a value of `shape` it holds."""
    from mlirxla.transforms.spmd_tiling import Tiling

    tiling = Tiling.from_hlo(sharding, len(shape), partitions)
    sizes = tiling.shard_shape(shape)
    return [tuple(slice(i * s, (i + 1) * s) for i, s in zip(vector, sizes)) for vector in tiling.index]


def split(array: np.ndarray, sharding: HloSharding, partitions: int) -> list[np.ndarray]:
    """The shard of `array` each partition holds."""
    return [np.ascontiguousarray(array[part]) for part in tile_slices(sharding, array.shape, partitions)]


def assemble(shards: list[np.ndarray], sharding: HloSharding, shape, dtype) -> np.ndarray:
    """The global value whose partitions hold `shards`."""
    out = np.empty(shape, dtype=dtype)
    for part, shard in zip(tile_slices(sharding, shape, len(shards)), shards):
        out[part] = shard
    return out


def entry_shardings(module: ir.Module) -> tuple[list[HloSharding], list[HloSharding]]:
    """The entry's argument and result shardings after propagation."""
    from mlirxla.transforms.sharding_propagation import ShardingPropagationPass

    clone = ir.Module.parse(module.operation.get_asm(enable_debug_info=True), module.context)
    with clone.context, ir.Location.unknown():
        ShardingPropagationPass().run(clone)
        function = entry_function(clone)

        def read(key: str, count: int) -> list[HloSharding]:
            entries = list(ir.ArrayAttr(function.attributes[key])) if key in function.attributes else []
            found = []
            for index in range(count):
                attributes = ir.DictAttr(entries[index]) if index < len(entries) else None
                present = attributes is not None and "xhlo.sharding" in attributes
                found.append(parse_attribute(attributes["xhlo.sharding"]) if present else HloSharding.replicated())
            return found

        signature = ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value)
        return read("arg_attrs", len(signature.inputs)), read("res_attrs", len(signature.results))


class ShardedExecutable:
    """A module compiled once for its grid (partitioned by the backend's pipeline), run on
    global arrays: each device is given its shards, the global outputs come back."""

    def __init__(self, module: ir.Module, backend: str = registry.DEFAULT, options=None, entry: str | None = None):
        config = read_config(module)
        self.partitions, self.replicas = config.partition_count, config.replica_count
        self.grid = module_grid(module)
        self.argument_shardings, self.result_shardings = entry_shardings(module)
        self.executable, _, result_types = compile_entry(module, entry or public_entry_name(module), options, backend)
        with module.context:
            self.result_shapes = [list(ir.RankedTensorType(t).shape) for t in result_types]

    def __call__(self, arguments: list[np.ndarray]) -> list[np.ndarray]:
        shards = [split(np.asarray(a), s, self.partitions) for a, s in zip(arguments, self.argument_shardings)]
        per_device = [[shards[i][p] for i in range(len(arguments))]
                      for _, p in itertools.product(range(self.replicas), range(self.partitions))]
        outputs = execute_on_devices([self.executable] * len(per_device), per_device, self.grid)
        return [assemble([outputs[p][i] for p in range(self.partitions)], sharding, shape, outputs[0][i].dtype)
                for i, (sharding, shape) in enumerate(zip(self.result_shardings, self.result_shapes))]


def execute_sharded(module: ir.Module, arguments: list[np.ndarray], backend: str = registry.DEFAULT, options=None,
                    entry: str | None = None) -> list[np.ndarray]:
    """Compile `module` and run it once on global `arguments` (`ShardedExecutable`)."""
    return ShardedExecutable(module, backend, options, entry)(arguments)
