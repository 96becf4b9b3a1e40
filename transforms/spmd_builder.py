"""The ops the SPMD partitioner emits: collectives over partition groups, each partition's
offsets, and an op rebuilt with local types.

What it decides, and why:

* **Group forms** are XLA's partitioner's: all-reduce, all-gather and reduce-scatter carry a
  channel and `use_global_device_ids`, their groups flattened device ids (a partition group
  repeated for every replica, `replica * partitions + partition`); all-to-all and
  collective-permute carry a channel and list partition ids (cross-partition), as
  `dialects/xhlo/process_groups.py` reads them. Every collective gets a fresh channel id,
  above any the module already uses.
* **Offsets from the partition id** (XLA's `MakePartitionOffsets`): a constant table with one
  entry per partition, read at `partition_id` by a dynamic-slice; a table whose entries are all
  equal is a constant. `partition_id` is read once per block, at its start, as i32.
* **Bytes moved** are counted per device as the issue defines them (what each device sends:
  an all-gather its shard to each other member, an all-reduce 2(n-1)/n of its buffer as a
  ring, a reduce-scatter and an all-to-all (n-1)/n, a permute its buffer) so the report and
  `benchmarks/spmd_vs_xla.py` can compare with XLA.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.dialects.xhlo.types import element_of, shape_of
from mlirxla.mlir import ir

REDUCER_OPS = {"add": "xhlo.add", "multiply": "xhlo.multiply", "maximum": "xhlo.maximum", "minimum": "xhlo.minimum",
               "and": "xhlo.and", "or": "xhlo.or"}
DROPPED_ATTRIBUTES = ("xhlo.sharding", "mhlo.sharding", "operandSegmentSizes", "resultSegmentSizes")


def tensor_type(shape, element) -> ir.RankedTensorType:
    return ir.RankedTensorType.get([int(s) for s in shape], element)


def byte_size(shape, element) -> int:
    width = ir.FloatType(element).width if isinstance(element, ir.FloatType) else ir.IntegerType(element).width if isinstance(element, ir.IntegerType) else 64
    return int(np.prod(shape, dtype=np.int64)) * max(1, width // 8)


def i64(value: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(value))


def groups_attribute(groups: list[list[int]]) -> ir.DenseElementsAttr:
    return ir.DenseElementsAttr.get(np.array(groups, dtype=np.int64).reshape(len(groups), len(groups[0]) if groups else 0))


@dataclass
class Collective:
    """One collective the partitioner inserted, for the report and the benchmark."""

    kind: str
    group_size: int
    group_count: int
    shape: tuple[int, ...]
    bytes_per_device: int

    def text(self) -> str:
        return f"{self.kind} over {self.group_count} group(s) of {self.group_size}, {list(self.shape)} ({self.bytes_per_device} bytes sent per device)"


@dataclass
class SpmdBuilder:
    """Emits at the current insertion point; counts what it inserts in `inserted`."""

    partitions: int
    replicas: int
    channel: int
    inserted: list[Collective] = field(default_factory=list)
    partition_ids: dict = field(default_factory=dict)

    # ------------------------------------------------------------ partition offsets

    def partition_id(self) -> ir.Value:
        """This partition's id as an i32 scalar, made once at the start of the current block."""
        block = ir.InsertionPoint.current.block
        for key, value in self.partition_ids.items():
            if key == block:
                return value
        i32 = ir.IntegerType.get_signless(32)
        with ir.InsertionPoint.at_block_begin(block):
            raw = create_op("xhlo.partition_id", [], [tensor_type([], ir.IntegerType.get_unsigned(32))], {}).result
        with ir.InsertionPoint(list(block.operations)[1]):
            value = create_op("xhlo.convert", [raw], [tensor_type([], i32)], {}).result
        self.partition_ids[block] = value
        return value

    def table(self, entries: list[int]) -> ir.Value:
        """An i32 scalar: `entries[partition_id]`."""
        i32 = ir.IntegerType.get_signless(32)
        if len(set(entries)) == 1:
            return self.constant(np.array(entries[0], dtype=np.int32), i32)
        table = self.constant(np.array(entries, dtype=np.int32), i32)
        picked = create_op("xhlo.dynamic_slice", [table, self.partition_id()], [tensor_type([1], i32)],
                           {"slice_sizes": ir.DenseI64ArrayAttr.get([1])}).result
        return create_op("xhlo.reshape", [picked], [tensor_type([], i32)], {}).result

    def constant(self, array: np.ndarray, element: ir.Type) -> ir.Value:
        if array.ndim == 0:  # numpy scalars become one-element vectors in DenseElementsAttr.get
            attr = ir.DenseElementsAttr.get_splat(tensor_type([], element), ir.IntegerAttr.get(element, int(array)))
        else:
            attr = ir.DenseElementsAttr.get(np.ascontiguousarray(array), type=element)
        return create_op("xhlo.constant", [], [attr.type], {"value": attr}).result

    def dynamic_slice(self, value: ir.Value, starts: list[ir.Value], sizes: list[int]) -> ir.Value:
        return create_op("xhlo.dynamic_slice", [value, *starts], [tensor_type(sizes, element_of(value.type))],
                         {"slice_sizes": ir.DenseI64ArrayAttr.get([int(s) for s in sizes])}).result

    # ------------------------------------------------------------ collectives

    def next_channel(self) -> ir.DictAttr:
        self.channel += 1
        return ir.DictAttr.get({"handle": i64(self.channel), "type": i64(1)})

    def device_groups(self, groups: list[list[int]]) -> list[list[int]]:
        return [[r * self.partitions + p for p in group] for r in range(self.replicas) for group in groups]

    def note(self, kind: str, groups, shape, element, factor: float) -> None:
        size = len(groups[0])
        self.inserted.append(Collective(kind, size, len(groups), tuple(shape), int(byte_size(shape, element) * factor)))

    def all_gather(self, value: ir.Value, dim: int, groups: list[list[int]]) -> ir.Value:
        shape = shape_of(value.type)
        result = list(shape)
        result[dim] *= len(groups[0])
        self.note("all-gather", groups, shape, element_of(value.type), len(groups[0]) - 1)
        return create_op("xhlo.all_gather", [value], [tensor_type(result, element_of(value.type))], {
            "all_gather_dim": i64(dim), "replica_groups": groups_attribute(self.device_groups(groups)),
            "channel_handle": self.next_channel(), "use_global_device_ids": ir.UnitAttr.get()}).result

    def reducer(self, op: ir.Operation, reducer: str, element: ir.Type) -> None:
        scalar = tensor_type([], element)
        block = op.regions[0].blocks.append(scalar, scalar)
        with ir.InsertionPoint(block):
            combined = create_op(REDUCER_OPS[reducer], [block.arguments[0], block.arguments[1]], [scalar], {}).result
            create_op("xhlo.return", [combined], [], {})

    def all_reduce(self, value: ir.Value, groups: list[list[int]], reducer: str) -> ir.Value:
        size = len(groups[0])
        self.note("all-reduce", groups, shape_of(value.type), element_of(value.type), 2 * (size - 1) / size)
        op = create_op("xhlo.all_reduce", [value], [value.type], {
            "replica_groups": groups_attribute(self.device_groups(groups)), "channel_handle": self.next_channel(),
            "use_global_device_ids": ir.UnitAttr.get()}, region_count=1)
        self.reducer(op, reducer, element_of(value.type))
        return op.results[0]

    def reduce_scatter(self, value: ir.Value, dim: int, groups: list[list[int]], reducer: str) -> ir.Value:
        shape = shape_of(value.type)
        size = len(groups[0])
        result = list(shape)
        result[dim] //= size
        self.note("reduce-scatter", groups, shape, element_of(value.type), (size - 1) / size)
        op = create_op("xhlo.reduce_scatter", [value], [tensor_type(result, element_of(value.type))], {
            "scatter_dimension": i64(dim), "replica_groups": groups_attribute(self.device_groups(groups)),
            "channel_handle": self.next_channel(), "use_global_device_ids": ir.UnitAttr.get()}, region_count=1)
        self.reducer(op, reducer, element_of(value.type))
        return op.results[0]

    def all_to_all(self, value: ir.Value, split: int, concat: int, groups: list[list[int]]) -> ir.Value:
        shape = shape_of(value.type)
        size = len(groups[0])
        result = list(shape)
        result[split] //= size
        result[concat] *= size
        self.note("all-to-all", groups, shape, element_of(value.type), (size - 1) / size)
        return create_op("xhlo.all_to_all", [value], [tensor_type(result, element_of(value.type))], {
            "split_dimension": i64(split), "concat_dimension": i64(concat), "split_count": i64(size),
            "replica_groups": groups_attribute(groups), "channel_handle": self.next_channel()}).result

    def collective_permute(self, value: ir.Value, pairs: list[tuple[int, int]]) -> ir.Value:
        moving = [(s, t) for s, t in pairs if s != t]
        self.inserted.append(Collective("collective-permute", 2, len(moving), tuple(shape_of(value.type)),
                                        byte_size(shape_of(value.type), element_of(value.type))))
        return create_op("xhlo.collective_permute", [value], [value.type], {
            "source_target_pairs": groups_attribute([list(p) for p in pairs]), "channel_handle": self.next_channel()}).result

    def keep_on(self, value: ir.Value, kept: list[bool]) -> ir.Value:
        """`value` on the partitions `kept` marks, zeros on the others (a whole value made the
        partial sums of an unreduced one)."""
        value_type = ir.RankedTensorType(value.type)
        if all(kept):
            return value
        i32, predicate = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(1)
        scalar_predicate = self.emit("xhlo.compare", [self.table([int(k) for k in kept]), self.constant(np.array(1, np.int32), i32)],
                                     tensor_type([], predicate), comparison_direction=ir.StringAttr.get("EQ"),
                                     compare_type=ir.StringAttr.get("SIGNED"))
        spread = ir.DenseI64ArrayAttr.get([])
        mask = self.emit("xhlo.broadcast", [scalar_predicate], tensor_type(value_type.shape, predicate), dimensions=spread)
        zero = self.emit("xhlo.convert", [self.constant(np.array(0, np.int32), i32)], tensor_type([], value_type.element_type))
        zeros = self.emit("xhlo.broadcast", [zero], value_type, dimensions=spread)
        return self.emit("xhlo.select", [mask, value, zeros], value_type)

    # ------------------------------------------------------------ rebuilding ops

    def emit(self, name: str, operands: list[ir.Value], result_type: ir.Type, **attributes) -> ir.Value:
        return create_op(name, operands, [result_type], attributes).result

    def rebuild(self, op: ir.Operation, operands: list[ir.Value], result_types: list[ir.Type], **changed) -> ir.Operation:
        """`op` with new operands and result types (its regions moved over), its other
        attributes kept but for shardings; `changed` attributes replaced."""
        if op.name.startswith("xhlo."):
            attributes = {name: op.attributes[name] for name in op.attributes if name not in DROPPED_ATTRIBUTES}
            attributes.update(changed)
            new = create_op(op.name, operands, result_types, attributes, op.location, region_count=len(op.regions))
        else:
            attributes = {name: op.attributes[name] for name in op.attributes if name not in DROPPED_ATTRIBUTES[:2]}
            new = ir.Operation.create(op.name, results=result_types, operands=operands, attributes=attributes,
                                      regions=len(op.regions), loc=op.location)
        for old_region, new_region in zip(op.regions, new.regions):
            for block in list(old_region.blocks):
                block.append_to(new_region)
        return new
