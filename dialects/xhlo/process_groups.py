"""Which devices a collective talks to: its group mode and its process groups.

The four modes are the StableHLO spec's (XLA's `CollectiveOpGroupMode`):

* `cross_replica`: `replica_groups` hold replica ids; each group meets once per partition;
* `cross_partition`: they hold partition ids; each group meets once per replica;
* `cross_replica_and_partition`: replica ids, each group taken across every partition;
* `flattened_ids`: device ids (`replica * partition_count + partition`) as they are.

Without a channel (no `channel_handle`, or a handle <= 0) an op is cross-replica. With one,
all_reduce / all_gather / reduce_scatter are flattened-id when `use_global_device_ids` is
set and cross-replica-and-partition otherwise; the other collectives are cross-partition.

A device is named by its flattened id. A process group lists devices in rank order, the order
values are gathered and reduced in, so that every device of a group computes the same bits.
"""

import re

from mlirxla.mlir import ir

from .config import ModuleConfig
from .types import ints

# ops whose groups span partitions too when they have a channel but no use_global_device_ids
CROSS_REPLICA_AND_PARTITION_OPS = frozenset({"xhlo.all_reduce", "xhlo.all_gather", "xhlo.reduce_scatter"})
# collectives whose `replica_groups` say who meets (collective_permute says it with pairs)
GROUP_OPS = CROSS_REPLICA_AND_PARTITION_OPS | {"xhlo.all_to_all", "xhlo.collective_broadcast", "xhlo.collective_reduce"}
MODES = ("cross_replica", "cross_partition", "cross_replica_and_partition", "flattened_ids")


def channel_id(op: ir.Operation) -> int | None:
    """The channel id of a collective, None without a channel (absent or <= 0)."""
    if "channel_handle" not in op.attributes:
        return None
    attr = op.attributes["channel_handle"]
    if isinstance(attr, ir.DictAttr):
        entries = ir.DictAttr(attr)
        handle = ir.IntegerAttr(entries["handle"]).value if "handle" in entries else 0
    elif isinstance(attr, ir.IntegerAttr):
        handle = ir.IntegerAttr(attr).value
    else:
        match = re.search(r"handle = (-?\d+)", str(attr))
        handle = int(match.group(1)) if match else 0
    return handle if handle > 0 else None


def uses_global_device_ids(op: ir.Operation) -> bool:
    if "use_global_device_ids" not in op.attributes:
        return False
    attr = op.attributes["use_global_device_ids"]
    return not (isinstance(attr, ir.BoolAttr) and not ir.BoolAttr(attr).value)


def group_mode(op: ir.Operation) -> str:
    """The op's mode; raises ValueError for `use_global_device_ids` without a channel, which
    has none."""
    channel = channel_id(op)
    if channel is None:
        if uses_global_device_ids(op):
            raise ValueError("use_global_device_ids requires a channel_handle")
        return "cross_replica"
    if op.name in CROSS_REPLICA_AND_PARTITION_OPS:
        return "flattened_ids" if uses_global_device_ids(op) else "cross_replica_and_partition"
    return "cross_partition"


def id_count(mode: str, config: ModuleConfig) -> int:
    """How many ids the groups of `mode` choose from."""
    if mode == "cross_partition":
        return config.partition_count
    if mode == "flattened_ids":
        return config.device_count
    return config.replica_count


def id_unit(mode: str) -> str:
    return {"cross_partition": "partition", "flattened_ids": "device"}.get(mode, "replica")


def listed_groups(attr: ir.Attribute) -> list[list[int]]:
    """The rows of a 2-d `replica_groups` attribute, -1 padding dropped; [] when empty."""
    shape = list(ir.ShapedType(ir.DenseElementsAttr(attr).type).shape)
    values = ints(attr)
    rows, width = (shape + [0, 0])[:2] if len(shape) == 2 else (1, len(values))
    groups = [[v for v in values[r * width:(r + 1) * width] if v != -1] for r in range(rows)]
    return [group for group in groups if group]


def process_groups(mode: str, groups: list[list[int]], config: ModuleConfig) -> list[list[int]]:
    """The spec's expansion of `groups` in `mode` into lists of flattened device ids; no
    groups at all means one group of every id."""
    replicas, partitions = config.replica_count, config.partition_count
    groups = groups or [list(range(id_count(mode, config)))]
    if mode == "cross_replica":
        return [[r * partitions + p for r in group] for group in groups for p in range(partitions)]
    if mode == "cross_partition":
        return [[r * partitions + p for p in group] for group in groups for r in range(replicas)]
    if mode == "cross_replica_and_partition":
        return [[r * partitions + p for p in range(partitions) for r in group] for group in groups]
    return [list(group) for group in groups]


def op_process_groups(op: ir.Operation, config: ModuleConfig) -> list[list[int]]:
    """The process groups of a collective with `replica_groups`."""
    attr = op.attributes["replica_groups"] if "replica_groups" in op.attributes else None
    groups = listed_groups(attr) if attr is not None else []
    return process_groups(group_mode(op), groups, config)


def permute_pairs(op: ir.Operation, config: ModuleConfig) -> list[tuple[int, int]]:
    """collective_permute's (source, target) pairs as device ids: replica ids repeated for
    every partition without a channel, partition ids repeated for every replica with one."""
    values = ints(op.attributes["source_target_pairs"])
    pairs = list(zip(values[0::2], values[1::2]))
    partitions = config.partition_count
    if channel_id(op) is None:
        return [(s * partitions + p, t * partitions + p) for p in range(partitions) for s, t in pairs]
    return [(r * partitions + s, r * partitions + t) for r in range(config.replica_count) for s, t in pairs]
