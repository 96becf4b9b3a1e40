"""The module config (XLA's HloModuleConfig): replica and partition counts, device
assignment, debug options and the parameters whose sharding the compiler may choose, kept on
the module as one `xhlo.config` dictionary."""

from dataclasses import dataclass, field, replace

import numpy as np

from mlirxla.mlir import ir

CONFIG = "xhlo.config"


@dataclass(frozen=True)
class ModuleConfig:
    """How many replicas and partitions run the module, on which devices, with which debug options.

    `device_assignment[replica][partition]` is a device id; by default device
    `replica * partition_count + partition` (XLA's flattened id).

    `open_parameters` are the entry parameters without a sharding whose sharding propagation
    may choose (XLA's `allow_spmd_sharding_propagation_to_parameters`, which jax sets for the
    arguments a jit leaves unspecified); the others without one are replicated.
    """

    replica_count: int = 1
    partition_count: int = 1
    device_assignment: tuple[tuple[int, ...], ...] = ()
    debug_options: dict[str, str] = field(default_factory=dict)
    open_parameters: tuple[int, ...] = ()

    @property
    def device_count(self) -> int:
        return self.replica_count * self.partition_count

    def devices(self) -> tuple[tuple[int, ...], ...]:
        if self.device_assignment:
            return self.device_assignment
        return tuple(
            tuple(r * self.partition_count + p for p in range(self.partition_count)) for r in range(self.replica_count)
        )

    def to_attribute(self) -> ir.Attribute:
        i64 = ir.IntegerType.get_signless(64)
        flat = [d for row in self.devices() for d in row]
        assignment = ir.DenseElementsAttr.get(
            np.array(flat, dtype=np.int64).reshape(self.replica_count, self.partition_count),
        )
        entries = {
            "replica_count": ir.IntegerAttr.get(i64, self.replica_count),
            "partition_count": ir.IntegerAttr.get(i64, self.partition_count),
            "device_assignment": assignment,
            "debug_options": ir.DictAttr.get({k: ir.StringAttr.get(v) for k, v in self.debug_options.items()}),
        }
        if self.open_parameters:
            entries["open_parameters"] = ir.DenseI64ArrayAttr.get(list(self.open_parameters))
        return ir.DictAttr.get(entries)

    @staticmethod
    def from_attribute(attr: ir.Attribute) -> "ModuleConfig":
        entries = ir.DictAttr(attr)
        replicas = ir.IntegerAttr(entries["replica_count"]).value
        partitions = ir.IntegerAttr(entries["partition_count"]).value
        flat = [int(v) for v in ir.DenseIntElementsAttr(entries["device_assignment"])] if "device_assignment" in entries else []
        rows = tuple(tuple(flat[r * partitions : (r + 1) * partitions]) for r in range(replicas)) if flat else ()
        debug = {}
        if "debug_options" in entries:
            debug = {named.name: ir.StringAttr(named.attr).value for named in ir.DictAttr(entries["debug_options"])}
        opened = tuple(ir.DenseI64ArrayAttr(entries["open_parameters"])) if "open_parameters" in entries else ()
        return ModuleConfig(replicas, partitions, rows, debug, opened)


def read_config(module: ir.Module) -> ModuleConfig:
    attributes = module.operation.attributes
    if CONFIG in attributes:
        return ModuleConfig.from_attribute(attributes[CONFIG])
    return ModuleConfig()


def write_config(module: ir.Module, config: ModuleConfig) -> None:
    module.operation.attributes[CONFIG] = config.to_attribute()


def open_parameters(module: ir.Module, indices: tuple[int, ...]) -> None:
    """Let propagation choose the sharding of these entry parameters (where they have none);
    on one partition there is nothing to choose."""
    config = read_config(module)
    if indices and config.partition_count > 1:
        write_config(module, replace(config, open_parameters=tuple(indices)))
