"""xhlo-spmd-partitioner: rewrite a module for P partitions, its values sharded by
propagation (`xhlo.sharding` on every op), into the program each partition runs, on local
shapes, with the communication it needs (XLA's `spmd_partitioner.cc`, `dot_handler.cc`,
`convolution_handler.cc`).

What it decides, and why:

* **Local shapes.** Entry parameters and results take the shape of one tile of their
  sharding; every op is rewritten to produce its result's tile as its sharding says. A
  partition finds its tiles' offsets from `partition_id` through constant tables
  (`transforms/spmd_builder.py`); how values move between shardings is
  `transforms/resharding.py`; which partition holds which tile, `transforms/spmd_tiling.py`.
* **Local ops**, their operands resharded to the result's tiling first: elementwise ops
  (compare, select, clamp, convert included; scalar operands replicated), broadcast,
  transpose, reshape when every sharded result dim is the major part of an operand dim (its
  element ranges then coincide), iota (plus its tile's offset), constants (a splat is made
  at the local shape, any other constant is sliced), optimization barriers, `@Sharding`
  annotations (a reshard to their sharding).
* **dot_general** chooses its iteration tiling (the result's dims next to the contracting
  dims) among: the result's own sharding, the operands' sharding of their batch and free
  dims, and none, each with the contracting dims tiled as the lhs or the rhs has them or
  not at all; the cheapest in bytes moved per device (operand reshards, the partial sum and
  the result's reshard) wins, ties to the earlier. Contracting dims tiled leave partial
  sums, summed over the partitions that differ only in their contracting tile by an
  all-reduce, or a reduce-scatter when the result is tiled across exactly those partitions.
  Batch- or free-dim-partitioned dots are local; 2D meshes come out of the same choice.
* **reduce** over dims its operand tiles: a local reduce, then the reducer's all-reduce over
  the partitions holding the other tiles of those dims (or a reduce-scatter), when the
  reducer is one binary op (add, multiply, maximum, minimum, and, or) and the init value its
  identity, so that each partition's init joins the result once; any other reduce gathers
  its reduced dims first.
* **convolution and reduce_window** (`transforms/spmd_windowed.py`): a convolution chooses
  its iteration tiling as a dot does (batch and output-feature tiles local, input-feature
  tiles partial sums, a grouped one's features tiled group-wise); tiled spatial dims, and a reduce_window's tiled windowed dims, get
  the rows their windows reach across a tile edge from the neighbours by collective-permute
  (halo exchange), the edges padded as the op pads; dims whose windows do not tile so are
  gathered.
* **while** keeps each carried value's sharding across the loop: operands reshard to it,
  the body and cond are partitioned in place with local block arguments, the body's results
  reshard back to it and the cond's predicate is replicated.
* **conditional** hands its operands to the branch functions as they are sharded, partitions
  each branch in place (a shard_map inside a `lax.cond`, `pmap` under `cond`, becomes local
  there), reshards what they return to the conditional's results and replicates the branch
  index; a branch function another op also calls falls back.
* **Slices, pads, concatenates, reverses, sorts and dynamic (update-)slices** tiled only on
  dims they do not touch (a full-range slice, no padding, another dim than the one they
  concatenate, reverse or sort, a full-size dynamic slice) run on each partition's tile;
  those linear in their operands together (all but pad and sort) take partial sums and give
  partial sums, so a gradient written into an unreduced accumulator is not summed first.
* **Gathers and scatters** tiled only on dims they take whole (a gather's fully sliced
  offset dims, a scatter's fully covered window dims) or batch dims of their indices (tied
  to the operand's batching dims, or, for a gather, any indices batch dim: the operand is
  then whole) run on each partition's tile.
* **Fallback**, for every other op (gathers and scatters tiled otherwise, the ops above
  tiled on a dim they touch, calls, custom calls): its operands are gathered to replicated, it runs
  whole, its results are sliced to their shardings: correct, slower; the report lists each.
* **shard_map regions** stay as written: the value a `@SPMDFullToShardShape` makes is the
  local tile of its operand (cut from it when a region nested in another holds it whole), ops on manual values are copied (with their regions, reading
  whole operands: a value a constraint in a partly manual region tiled over the other axes
  is gathered), `@SPMDShardToFullShape` makes its operand the tile of a value sharded as it
  says.
* **Unreduced values** (an `unreduced` subgroup: partial sums, `Tiling.partial`): reshards
  keep their value (`transforms/resharding.py`); a dot or reduce feeding only an unreduced
  constraint leaves its partial sums unsummed where they are that constraint's summands; a
  product, quotient or dot reads its whole operands whole next to an unreduced one; any
  other op with an unreduced result and whole operands computes it whole and makes it
  partial, but a scatter-add whose updates are split across the result's labels scatters
  each partition's own (`transforms/spmd_unreduced.py`); a loop carries an unreduced operand unreduced.
* **Uneven shardings** (a dim its tiles do not divide) are padded, as XLA pads them
  (`transforms/spmd_padding.py`): each partition holds ceil(n/k) elements of the dim, entry
  parameters and results included (the caller's per-device buffers are padded tiles); a
  reduce over a padded dim masks the padding with its init (the reducer's identity), a dot
  contracting over one zeroes it in both operands, resharding slices it off or pads to it.

Afterwards no `xhlo.sharding` is left and the sharding annotations are gone, so
`partitioning_need` says the module is each partition's program; the entry's global shapes
and shardings, which the caller splits and assembles arrays by, stay on the module as
`xhlo.global_entry` (`dialects/xhlo/global_entry.py`). The report
(`spmd-partitioner.txt`) says per op its sharding, what it became, the collectives inserted
and the fallbacks, with totals per collective kind. Changed: always, when it runs.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from mlirxla.dialects.xhlo import global_entry
from mlirxla.dialects.xhlo.builder import splat_of_type
from mlirxla.dialects.xhlo.config import read_config
from mlirxla.dialects.xhlo.ops import ELEMENTWISE_OPS
from mlirxla.dialects.xhlo.process_groups import channel_id
from mlirxla.dialects.xhlo.sharding import HloSharding, parse_attribute
from mlirxla.dialects.xhlo.types import element_of, shape_of
from mlirxla.errors import location_text
from mlirxla.ir_queries import defining_op, entry_function, function_name, module_functions, nested_ops
from mlirxla.mlir import ir
from mlirxla.runtime import literals

from .erasure import erase, processing
from .pass_base import ModulePass, PassReport, PassResult
from .resharding import cost, finish_cost, finish_partial, reshard
from .sharding_remover import forward_annotations, is_annotation, partitioning_need
from .spmd_builder import REDUCER_OPS, Collective, SpmdBuilder, tensor_type
from .spmd_padding import mask_padding
from .sharding_rules import declared_batch_dims, numbers
from .spmd_tiling import Tiling
from .spmd_windowed import convolution, reduce_window

SHARDING = "xhlo.sharding"
FUNCTION_SHARDINGS = ("xhlo.sharding", "mhlo.sharding")


@dataclass
class Local:
    """What an original value became: its local value, its tiling (None: manual, the value
    as written inside shard_map) and its global shape."""

    value: ir.Value
    tiling: Tiling | None
    shape: tuple[int, ...]


@dataclass
class OpRecord:
    label: str
    sharding: str
    became: str
    collectives: list[Collective]
    fallback: bool = False


@dataclass
class PartitionerReport(PassReport):
    partitions: int
    records: list[OpRecord] = field(default_factory=list)

    def collectives(self) -> list[Collective]:
        return [c for r in self.records for c in r.collectives]

    def text(self) -> str:
        collectives = self.collectives()
        counts = Counter(c.kind for c in collectives)
        moved = Counter()
        for c in collectives:
            moved[c.kind] += c.bytes_per_device
        lines = [f"spmd partitioner: {self.partitions} partitions", "", "collectives inserted (kind: count, bytes sent per device):"]
        lines += [f"  {kind}: {counts[kind]}, {moved[kind]} bytes" for kind in sorted(counts)] or ["  none"]
        lines.append(f"  total: {sum(moved.values())} bytes per device")
        fallbacks = [r.label for r in self.records if r.fallback]
        lines += ["", "fallbacks (operands gathered, op run whole, result sliced):"]
        lines += [f"  {f}" for f in fallbacks] or ["  none"]
        lines += ["", "ops (sharding: what it became):"]
        for record in self.records:
            lines.append(f"  {record.label}: {record.sharding}")
            lines.append(f"    {record.became}")
            lines += [f"    + {c.text()}" for c in record.collectives]
        return "\n".join(lines) + "\n"

    def dump_files(self) -> dict[str, str]:
        return {"spmd-partitioner.txt": self.text()}


@dataclass(frozen=True)
class SpmdPartitionerPass(ModulePass):
    """Rewrites a propagated module into each partition's program (module docstring)."""

    name: ClassVar[str] = "xhlo-spmd-partitioner"
    summary: ClassVar[str] = "rewrite a sharded module into the per-partition program with local shapes and collectives"

    def run(self, module: ir.Module) -> bool | PassResult:
        if partitioning_need(module) is None or entry_function(module) is None:
            return False
        partitioner = _Partitioner(module)
        partitioner.run()
        return PassResult(True, partitioner.report)


def _shardings(op: ir.Operation) -> list[HloSharding]:
    count = len(op.results)
    if SHARDING not in op.attributes:
        return [HloSharding.replicated() for _ in range(count)]
    hlo = parse_attribute(op.attributes[SHARDING])
    return list(hlo.elements) if hlo.kind == "tuple" else [hlo for _ in range(count)]


def _is_manual(hlo: HloSharding) -> bool:
    return hlo.kind == "manual" or "manual" in hlo.subgroup_types


def _ranked(value) -> bool:
    return isinstance(value.type, ir.RankedTensorType)


def _ints(op: ir.Operation, name: str) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes[name])) if name in op.attributes else []


# pass-through ops linear in their array operands together: on partial sums they give the
# partial sums of their result (a gradient written into an unreduced accumulator stays unreduced)
LINEAR_PASSTHROUGH = ("xhlo.slice", "xhlo.concatenate", "xhlo.reverse", "xhlo.dynamic_slice", "xhlo.dynamic_update_slice")


def tiled_only_on(tiling: Tiling, dims: set[int]) -> bool:
    return all(t == 1 or d in dims for d, t in enumerate(tiling.tiles))


def passthrough_dims(op: ir.Operation, operand_shapes: list[list[int]]) -> set[int] | None:
    """The dims of an op's (first) result that it copies from the same dim of its array
    operands untouched, element for element; None for an op without such dims.
    `operand_shapes` are the operands' global shapes (the op may read local values already)."""
    shape = shape_of(op.results[0].type)
    everything = set(range(len(shape)))
    if op.name == "xhlo.slice":
        operand = operand_shapes[0]
        return {d for d, (start, limit, stride) in enumerate(zip(_ints(op, "start_indices"), _ints(op, "limit_indices"), _ints(op, "strides")))
                if start == 0 and limit == operand[d] and stride == 1}
    if op.name == "xhlo.pad":
        return {d for d, edges in enumerate(zip(_ints(op, "edge_padding_low"), _ints(op, "edge_padding_high"), _ints(op, "interior_padding")))
                if edges == (0, 0, 0)}
    if op.name in ("xhlo.concatenate", "xhlo.sort"):
        return everything - {ir.IntegerAttr(op.attributes["dimension"]).value}
    if op.name == "xhlo.reverse":
        return everything - set(_ints(op, "dimensions"))
    if op.name == "xhlo.dynamic_slice":
        operand = operand_shapes[0]
        return {d for d, size in enumerate(_ints(op, "slice_sizes")) if size == operand[d]}
    if op.name == "xhlo.dynamic_update_slice":
        update = operand_shapes[1]
        return {d for d in everything if update[d] == shape[d]}
    return None


def reducer_kind(region: ir.Region) -> str | None:
    """The binary op a reducer is (add, maximum, ...), when it is exactly one on its arguments."""
    block = region.blocks[0]
    ops = list(block.operations)
    if len(ops) != 2 or len(block.arguments) != 2:
        return None
    combine = ops[0]
    kinds = {v: k for k, v in REDUCER_OPS.items()}
    arguments = list(block.arguments)
    operands = list(combine.operands)
    if combine.name not in kinds or not (operands == arguments or operands == arguments[::-1]):
        return None
    if list(ops[1].operands) != [combine.results[0]]:
        return None
    return kinds[combine.name]


def is_identity(value: ir.Value, kind: str) -> bool:
    """`value` is a constant equal to the identity of reducer `kind`."""
    op = defining_op(value)
    if op is None or op.name != "xhlo.constant":
        return False
    array = literals.to_numpy(op.attributes["value"])
    if array.size != 1:
        return False
    x = array.reshape(-1)[0]
    if kind == "add":
        return x == 0
    if kind == "multiply":
        return x == 1
    if kind == "or":
        return not bool(x)
    if kind == "and":
        return bool(x) if array.dtype == np.bool_ else int(x) == -1 or (np.issubdtype(array.dtype, np.unsignedinteger) and int(x) == np.iinfo(array.dtype).max)
    lowest = kind == "maximum"
    if np.issubdtype(array.dtype, np.floating):
        return bool(np.isinf(x)) and (x < 0) == lowest
    if np.issubdtype(array.dtype, np.integer):
        info = np.iinfo(array.dtype)
        return int(x) == (info.min if lowest else info.max)
    return False


class _Partitioner:
    def __init__(self, module: ir.Module):
        self.module = module
        config = read_config(module)
        self.partitions = config.partition_count
        channels = [c for op in nested_ops(module.operation) if (c := channel_id(op)) is not None]
        self.b = SpmdBuilder(config.partition_count, config.replica_count, max(channels, default=0))
        self.env: dict = {}
        self.report = PartitionerReport(config.partition_count)
        self.counter = 0
        self.scaling = False

    # ------------------------------------------------------------ values

    def tiling(self, hlo: HloSharding, shape) -> Tiling | None:
        return Tiling.from_hlo(hlo, len(shape), self.partitions)

    def local_type(self, value_type, tiling: Tiling | None):
        if tiling is None or not isinstance(value_type, ir.RankedTensorType):
            return value_type
        return tensor_type(tiling.shard_shape(shape_of(value_type)), element_of(value_type))

    def get(self, value: ir.Value, target: Tiling | None) -> ir.Value:
        """The local value of `value` tiled as `target`. A whole operand of an op that scales
        an unreduced one (`scaling` below) is read whole on every partition, not made partial."""
        local = self.env[value]
        if local.tiling is None or target is None:
            return local.value
        if self.scaling and target.partial is not None and local.tiling.partial is None:
            target = target.with_partial(None)
        return reshard(self.b, local.value, local.shape, local.tiling, target)

    def replicated(self, value: ir.Value) -> Tiling:
        return Tiling.replicated(len(shape_of(value.type)), self.partitions)

    def define(self, value: ir.Value, local: ir.Value, tiling: Tiling | None) -> None:
        self.env[value] = Local(local, tiling, tuple(shape_of(value.type)) if _ranked(value) else ())

    def cost(self, value: ir.Value, target: Tiling) -> float:
        local = self.env[value]
        return cost(local.shape, element_of(value.type), local.tiling, target)

    # ------------------------------------------------------------ the module

    def run(self) -> None:
        function = entry_function(self.module)
        global_entry.record(self.module, function)
        block = function.regions[0].blocks[0]
        arg_attrs = self.function_attrs(function, "arg_attrs", len(block.arguments))
        result_types = list(ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value).results)
        res_attrs = self.function_attrs(function, "res_attrs", len(result_types))
        for index, argument in enumerate(block.arguments):
            tiling = None
            if _ranked(argument):
                hlo = parse_attribute(arg_attrs[index][SHARDING]) if SHARDING in arg_attrs[index] else HloSharding.replicated()
                tiling = self.tiling(hlo, shape_of(argument.type))
            self.define(argument, argument, tiling)
            argument.set_type(self.local_type(argument.type, tiling))
        result_tilings = []
        for index, value_type in enumerate(result_types):
            hlo = parse_attribute(res_attrs[index][SHARDING]) if SHARDING in res_attrs[index] else HloSharding.replicated()
            ranked = isinstance(value_type, ir.RankedTensorType)
            result_tilings.append(self.tiling(hlo, shape_of(value_type)) if ranked else None)

        def finish(terminator):
            for index, value in enumerate(list(terminator.operands)):
                terminator.operands[index] = self.get(value, result_tilings[index])

        self.partition_block(block, finish)
        new_results = [self.local_type(t, tiling) for t, tiling in zip(result_types, result_tilings)]
        function.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get([a.type for a in block.arguments], new_results))
        for key, entries in (("arg_attrs", arg_attrs), ("res_attrs", res_attrs)):
            if key in function.attributes:
                function.attributes[key] = ir.ArrayAttr.get([ir.DictAttr.get({k: v for k, v in e.items() if k not in FUNCTION_SHARDINGS}) for e in entries])
        self.strip()

    @staticmethod
    def function_attrs(function, key: str, count: int) -> list[dict]:
        if key not in function.attributes:
            return [{} for _ in range(count)]
        return [{n.name: n.attr for n in ir.DictAttr(e)} for e in ir.ArrayAttr(function.attributes[key])]

    def strip(self) -> None:
        """What the partitioned module no longer needs: shardings everywhere (functions run
        whole, as fallbacks, keep theirs as identities)."""
        forward_annotations(self.module)
        for op in nested_ops(self.module.operation):
            if SHARDING in op.attributes:
                del op.attributes[SHARDING]
        for function in module_functions(self.module):
            for key in ("arg_attrs", "res_attrs"):
                if key in function.attributes:
                    entries = [{n.name: n.attr for n in ir.DictAttr(e)} for e in ir.ArrayAttr(function.attributes[key])]
                    function.attributes[key] = ir.ArrayAttr.get([ir.DictAttr.get({k: v for k, v in e.items() if k not in FUNCTION_SHARDINGS}) for e in entries])

    def partition_block(self, block: ir.Block, finish) -> None:
        """Partition the ops of `block` in place: new ops go before each old one, the
        terminator is redirected by `finish`, the old ops are erased."""
        ops = list(block.operations)
        for op in ops[:-1]:
            processing(op)
            with ir.InsertionPoint(op), op.location:
                self.partition_op(op)
        start = len(self.b.inserted)
        with ir.InsertionPoint(ops[-1]), ops[-1].location:
            finish(ops[-1])
        if len(self.b.inserted) > start:
            label = f"{ops[-1].name} at {location_text(ops[-1].location)}"
            self.report.records.append(OpRecord(label, "what it returns", "returned values resharded as they must leave", self.b.inserted[start:]))
        for op in reversed(ops[:-1]):
            erase(op)

    # ------------------------------------------------------------ ops

    def partition_op(self, op: ir.Operation) -> None:
        self.counter += 1
        label = f"#{self.counter} {op.name} at {location_text(op.location)}"
        sharding = str(parse_attribute(op.attributes[SHARDING])) if SHARDING in op.attributes else "{replicated}"
        start = len(self.b.inserted)
        hlos = _shardings(op)
        operand_locals = [self.env.get(v) for v in op.operands]
        manual = any(_is_manual(h) for h in hlos) or any(l is not None and l.tiling is None and _ranked(v) for l, v in zip(operand_locals, op.operands))
        tilings = [self.tiling(h, shape_of(r.type)) if _ranked(r) else None for h, r in zip(hlos, op.results)]
        target = op.attributes["call_target_name"] if op.name == "xhlo.custom_call" else None
        target = ir.StringAttr(target).value if target is not None else None
        fallback = False
        if target == "SPMDFullToShardShape":
            self.define(op.results[0], self.shard_of(op), None)
            became = "the manual region's input: the local tile of its operand"
        elif target == "SPMDShardToFullShape":
            tiling = Tiling.from_hlo(hlos[0], len(shape_of(op.results[0].type)), self.partitions)
            self.define(op.results[0], self.env[op.operands[0]].value, tiling)
            became = "the manual region's output: the tile of a value sharded so"
        elif manual:
            new = self.copy_as_written(op)
            for result, local in zip(op.results, new.results):
                self.define(result, local, None)
            became = "manual (inside shard_map): copied as written"
        elif is_annotation(op):
            self.define(op.results[0], self.get(op.operands[0], tilings[0]), tilings[0])
            became = "annotation: a reshard of its operand"
        else:
            tilings = [self.unreduced_user(result) or tiling for result, tiling in zip(op.results, tilings)]
            became, fallback = self.partition_computation(op, tilings)
        self.report.records.append(OpRecord(label, sharding, became, self.b.inserted[start:], fallback))

    def partition_computation(self, op: ir.Operation, tilings) -> tuple[str, bool]:
        """An op that computes, by its handler or the fallback (what it became, whether it
        fell back). Results unreduced where no operand is are computed whole and then made
        partial, but for a dot's, a reduce's or a scatter's, whose partial sums may be left
        unsummed; an op that scales an unreduced operand by others (a product, a quotient, a
        dot) reads the others whole, and sums a second unreduced operand first."""
        partial_operands = [v for v in op.operands if _ranked(v) and (local := self.env.get(v)) is not None
                            and local.tiling is not None and local.tiling.partial is not None]
        if not partial_operands and op.name not in REDUCING_OPS and any(t is not None and t.partial is not None for t in tilings):
            became, fallback = self.partition_computation(op, [None if t is None else t.with_partial(None) for t in tilings])
            for result, tiling in zip(op.results, tilings):
                if tiling is not None and tiling.partial is not None:
                    local = self.env[result]
                    self.define(result, reshard(self.b, local.value, local.shape, local.tiling, tiling), tiling)
            return became + ", then made unreduced", fallback
        if op.name in SCALING_OPS and len(partial_operands) > 1:
            # a product of two partial sums is no partial sum of the product: sum them first
            kept = {v: self.env[v] for v in partial_operands}
            for value, local in kept.items():
                whole = local.tiling.with_partial(None)
                self.env[value] = Local(reshard(self.b, local.value, local.shape, local.tiling, whole), whole, local.shape)
            try:
                return self.partition_computation(op, tilings)
            finally:
                self.env.update(kept)
        handler = HANDLERS.get(op.name)
        if handler is None and op.name in ELEMENTWISE_OPS:
            handler = _Partitioner.elementwise
        self.scaling = bool(partial_operands) and op.name in SCALING_OPS
        try:
            became = handler(self, op, tilings) if handler is not None else None
        finally:
            self.scaling = False
        if became is None:
            return self.fallback(op, tilings), True
        return became, False

    def unreduced_user(self, result: ir.Value) -> Tiling | None:
        """The unreduced tiling of the one annotation reading `result`, if that is its only
        user: jax follows every op whose value is unreduced by such a constraint, and
        producing the partial sums in place (a dot's, left unsummed) is what it asks for."""
        users = [use.owner for use in result.uses]
        if len(users) != 1 or not is_annotation(users[0]) or SHARDING not in users[0].attributes or not _ranked(result):
            return None
        tiling = self.tiling(parse_attribute(users[0].attributes[SHARDING]), shape_of(result.type))
        return tiling if tiling is not None and tiling.partial is not None else None

    def shard_of(self, to_shard: ir.Operation) -> ir.Value:
        """The local tile a `@SPMDFullToShardShape` makes. Its operand is partitioned as the
        `@Sharding` before it says, so its local value is the tile; but inside another manual
        region (a shard_map nested in one manual over other axes) that operand is copied as
        written, whole, and the tile of the new manual axes is cut from it here."""
        operand = to_shard.operands[0]
        local = self.env[operand]
        annotation = defining_op(operand)
        if (local.tiling is not None or shape_of(local.value.type) == shape_of(to_shard.results[0].type)
                or annotation is None or SHARDING not in annotation.attributes):
            return local.value
        tiling = self.tiling(parse_attribute(annotation.attributes[SHARDING]), local.shape)
        return reshard(self.b, local.value, local.shape, self.replicated(operand), tiling)

    def whole(self, value: ir.Value) -> ir.Value:
        """The local value of `value` as an op copied as written reads it: whole, so that one
        partitioned outside the manual axes (a constraint inside a shard_map) is gathered."""
        return self.get(value, self.replicated(value)) if _ranked(value) else self.env[value].value

    def copy_as_written(self, op: ir.Operation) -> ir.Operation:
        """`op` on the whole local values of its operands, its regions moved over as written;
        the values its regions capture from outside (a loop body reading a constant of the
        function) read their local values too, since the ops defining them go."""
        captured = {value: self.whole(value) for value in captured_values(op)}
        new = self.b.rebuild(op, [self.whole(v) for v in op.operands], [r.type for r in op.results])
        if captured:
            for inner in nested_ops(new):
                for index, operand in enumerate(list(inner.operands)):
                    if operand in captured:
                        inner.operands[index] = captured[operand]
        return new

    def finish_results(self, op: ir.Operation, new: ir.Operation, tilings) -> None:
        for result, local, tiling in zip(op.results, new.results, tilings):
            self.define(result, local, tiling)

    def elementwise(self, op: ir.Operation, tilings) -> str:
        result = tilings[0]
        shape = shape_of(op.results[0].type)
        operands = [self.get(v, result if list(self.env[v].shape) == shape else self.replicated(v)) for v in op.operands]
        new = self.b.rebuild(op, operands, [self.local_type(r.type, t) for r, t in zip(op.results, tilings)])
        self.finish_results(op, new, tilings)
        return "local (elementwise)"

    def fallback(self, op: ir.Operation, tilings) -> str:
        operands = [self.get(v, self.replicated(v)) if _ranked(v) else self.env[v].value for v in op.operands]
        new = self.b.rebuild(op, operands, [r.type for r in op.results])
        for result, local, tiling in zip(op.results, new.results, tilings):
            value = local if tiling is None else reshard(self.b, local, shape_of(result.type), self.replicated(result), tiling)
            self.define(result, value, tiling)
        return "fallback: operands replicated, run whole, results sliced to their shardings"

    def constant(self, op: ir.Operation, tilings) -> str:
        tiling = tilings[0]
        attr = op.attributes["value"]
        if tiling.is_replicated():
            new = self.b.rebuild(op, [], [op.results[0].type])
            self.define(op.results[0], new.results[0], tiling)
            return "local (replicated constant)"
        local_type = self.local_type(op.results[0].type, tiling)
        if isinstance(attr, ir.DenseElementsAttr) and ir.DenseElementsAttr(attr).is_splat:
            splat = splat_of_type(ir.DenseElementsAttr(attr).get_splat_value(), local_type)
            new = self.b.rebuild(op, [], [local_type], value=splat)
            self.define(op.results[0], new.results[0], tiling)
            return "local (the splat at the tile's shape)"
        whole = self.b.rebuild(op, [], [op.results[0].type])
        self.define(op.results[0], reshard(self.b, whole.results[0], shape_of(op.results[0].type), self.replicated(op.results[0]), tiling), tiling)
        return "the constant, sliced at the partition's offset"

    def iota(self, op: ir.Operation, tilings) -> str:
        tiling = tilings[0]
        dim = ir.IntegerAttr(op.attributes["iota_dimension"]).value
        local_type = self.local_type(op.results[0].type, tiling)
        value = self.b.rebuild(op, [], [local_type]).results[0]
        if tiling.tiles[dim] > 1:
            offset = self.b.table(tiling.offsets(shape_of(op.results[0].type), dim))
            element = element_of(local_type)
            scalar = self.b.emit("xhlo.convert", [offset], tensor_type([], element))
            spread = self.b.emit("xhlo.broadcast", [scalar], local_type, dimensions=ir.DenseI64ArrayAttr.get([]))
            value = self.b.emit("xhlo.add", [value, spread], local_type)
        self.define(op.results[0], value, tiling)
        return "local iota" + (" plus the tile's offset" if tiling.tiles[dim] > 1 else "")

    def broadcast(self, op: ir.Operation, tilings) -> str:
        tiling = tilings[0]
        dims = _ints(op, "dimensions")
        operand_shape, result_shape = list(self.env[op.operands[0]].shape), shape_of(op.results[0].type)
        source = tiling.restrict([d if operand_shape[i] == result_shape[d] else None for i, d in enumerate(dims)])
        new = self.b.rebuild(op, [self.get(op.operands[0], source)], [self.local_type(op.results[0].type, tiling)])
        self.finish_results(op, new, tilings)
        return "local (broadcast of the operand's matching tile)"

    def transpose(self, op: ir.Operation, tilings) -> str:
        tiling = tilings[0]
        perm = _ints(op, "permutation")
        source = tiling.restrict([perm.index(j) for j in range(len(perm))])
        new = self.b.rebuild(op, [self.get(op.operands[0], source)], [self.local_type(op.results[0].type, tiling)])
        self.finish_results(op, new, tilings)
        return "local (transpose)"

    def reshape(self, op: ir.Operation, tilings) -> str | None:
        tiling = tilings[0]
        source = reshape_source(list(self.env[op.operands[0]].shape), shape_of(op.results[0].type), tiling)
        if source is None:
            return None
        new = self.b.rebuild(op, [self.get(op.operands[0], source)], [self.local_type(op.results[0].type, tiling)])
        self.finish_results(op, new, tilings)
        return "local (the sharded dims map through the reshape)"

    def barrier(self, op: ir.Operation, tilings) -> str:
        operands = [self.get(v, t) if t is not None else self.env[v].value for v, t in zip(op.operands, tilings)]
        new = self.b.rebuild(op, operands, [self.local_type(r.type, t) for r, t in zip(op.results, tilings)])
        self.finish_results(op, new, tilings)
        return "local (each operand at its result's sharding)"

    def dot(self, op: ir.Operation, tilings) -> str:
        out = tilings[0]
        n = numbers(op, "dot_dimension_numbers")
        lb, rb = n.get("lhs_batching_dimensions", []), n.get("rhs_batching_dimensions", [])
        lc, rc = n.get("lhs_contracting_dimensions", []), n.get("rhs_contracting_dimensions", [])
        lhs, rhs = op.operands[0], op.operands[1]
        lhs_shape, rhs_shape, out_shape = list(self.env[lhs].shape), list(self.env[rhs].shape), shape_of(op.results[0].type)
        lf = [d for d in range(len(lhs_shape)) if d not in lb + lc]
        rf = [d for d in range(len(rhs_shape)) if d not in rb + rc]
        nout = len(out_shape)
        lhs_factor = {**{d: i for i, d in enumerate(lb)}, **{d: len(lb) + j for j, d in enumerate(lf)}, **{d: nout + c for c, d in enumerate(lc)}}
        rhs_factor = {**{d: i for i, d in enumerate(rb)}, **{d: len(lb) + len(lf) + j for j, d in enumerate(rf)}, **{d: nout + c for c, d in enumerate(rc)}}
        L, R = self.env[lhs].tiling, self.env[rhs].tiling
        contracting = [L.restrict(lc), R.restrict(rc), Tiling.replicated(len(lc), self.partitions)]
        # an unreduced operand's partial sums stay its own, the result's before its finish
        partial = next((t.partial for t in (L, R) if t.partial is not None), None)
        outputs = [t.with_partial(partial) for t in (out, L.restrict(lb + lf).concat(R.restrict(rf)), Tiling.replicated(nout, self.partitions))]
        element = element_of(op.results[0].type)
        best = None
        for out_tiling in outputs:
            for contract in contracting:
                space = out_tiling.concat(contract)
                if not space.valid():
                    continue
                lhs_target = space.restrict([lhs_factor[d] for d in range(len(lhs_shape))])
                rhs_target = space.restrict([rhs_factor[d] for d in range(len(rhs_shape))])
                partial = not contract.is_replicated()
                groups = space.groups_over(range(nout, nout + len(lc))) if partial else None
                total = self.cost(lhs, lhs_target) + self.cost(rhs, rhs_target)
                total += finish_cost(out_shape, element, out_tiling, groups, out) if partial else cost(out_shape, element, out_tiling, out)
                if best is None or total < best[0]:
                    best = (total, out_tiling, lhs_target, rhs_target, groups)
        _, out_tiling, lhs_target, rhs_target, groups = best
        operands = [mask_padding(self.b, self.get(v, target), shape, target, contracting_dims)
                    for v, shape, target, contracting_dims in ((lhs, lhs_shape, lhs_target, lc), (rhs, rhs_shape, rhs_target, rc))]
        new = self.b.rebuild(op, operands, [self.local_type(op.results[0].type, out_tiling)])
        value = new.results[0]
        if groups is not None:
            value = finish_partial(self.b, value, out_shape, out_tiling, groups, "or" if isinstance(element, ir.IntegerType) and ir.IntegerType(element).width == 1 else "add", out)
            how = f"local dot on the contracting dims' tiles, partial sums over groups of {len(groups[0])} combined"
        else:
            value = reshard(self.b, value, out_shape, out_tiling, out)
            how = "local dot"
        self.define(op.results[0], value, out)
        return f"{how}; lhs tiles {list(lhs_target.tiles)}, rhs tiles {list(rhs_target.tiles)}, computed tiles {list(out_tiling.tiles)}"

    def reduce(self, op: ir.Operation, tilings) -> str:
        count = len(op.operands) // 2
        inputs, inits = list(op.operands)[:count], list(op.operands)[count:]
        dims = _ints(op, "dimensions")
        source = self.env[inputs[0]].tiling
        shape = list(self.env[inputs[0]].shape)
        kept = [d for d in range(len(shape)) if d not in dims]
        kind = reducer_kind(op.regions[0])
        sharded = [d for d in dims if source.tiles[d] > 1]
        if count == 1 and kind is not None and sharded and is_identity(inits[0], kind):
            result_tiling = source.restrict(kept)
            init = self.get(inits[0], self.replicated(inits[0]))
            masked = mask_padding(self.b, self.env[inputs[0]].value, shape, source, sharded, init)
            new = self.b.rebuild(op, [masked, init], [self.local_type(op.results[0].type, result_tiling)])
            groups = source.groups_over(dims)
            value = finish_partial(self.b, new.results[0], shape_of(op.results[0].type), result_tiling, groups, kind, tilings[0])
            self.define(op.results[0], value, tilings[0])
            return f"local reduce, partial results combined by {kind} over groups of {len(groups[0])}"
        whole = source.without(dims)
        operands = [self.get(v, whole) for v in inputs] + [self.get(v, self.replicated(v)) for v in inits]
        result_tiling = whole.restrict(kept)
        new = self.b.rebuild(op, operands, [self.local_type(r.type, result_tiling) for r in op.results])
        for result, local, tiling in zip(op.results, new.results, tilings):
            self.define(result, reshard(self.b, local, shape_of(result.type), result_tiling, tiling), tiling)
        return "local reduce" + (" after gathering the reduced dims" if sharded else "")

    def scatter(self, op: ir.Operation, tilings) -> str | None:
        """A scatter-add whose result is unreduced over the partitions its updates are split
        across (a `segment_sum` or `bincount` of sharded data with an unreduced result, as
        XLA partitions it): each partition scatters its own updates into the operand's
        partial sums; None (the fallback) otherwise."""
        target = tilings[0]
        if target is not None and target.partial is None:
            return self.scatter_passing_through(op, tilings)
        if len(op.operands) != 3 or target is None or not target.is_replicated():
            return None
        n = numbers(op, "dimension_numbers")
        operand, indices, updates = op.operands
        I, U = self.env[indices].tiling, self.env[updates].tiling
        if (reducer_kind(op.regions[0]) != "add" or n.get("input_batching_dims") or I is None or U is None
                or I.partial is not None or U.partial is not None):
            return None
        update_shape, index_rank = self.env[updates].shape, len(self.env[indices].shape)
        window = n.get("update_window_dims", [])
        vector_dim = n["index_vector_dim"]
        batch = [d for d in range(index_rank) if d != vector_dim]
        scattered = [u for u in range(len(update_shape)) if u not in window]
        if any(U.tiles[u] > 1 for u in window) or (vector_dim < index_rank and I.tiles[vector_dim] > 1):
            return None
        if any(update_shape[u] % U.tiles[u] for u in scattered):
            return None
        for i, u in zip(batch, scattered):
            if I.tiles[i] != U.tiles[u] or any(I.index[p][i] != U.index[p][u] for p in range(self.partitions)):
                return None
        pieces: dict[int, tuple] = {}
        if any(pieces.setdefault(target.label(p), U.index[p]) != U.index[p] for p in range(self.partitions)):
            return None
        if len(set(pieces.values())) != len(pieces) or len(pieces) != int(np.prod(U.tiles, dtype=np.int64)):
            return None
        local = [self.get(operand, target), self.env[indices].value, self.env[updates].value]
        new = self.b.rebuild(op, local, [self.local_type(op.results[0].type, target)])
        self.finish_results(op, new, tilings)
        return "local scatter-add of each partition's updates: the result's partial sums"

    def scatter_passing_through(self, op: ir.Operation, tilings) -> str | None:
        """A scatter tiled only on operand dims its updates cover whole (window dims) or index
        by batch (batching dims, tied to the indices' and updates' batch dims) runs on each
        partition's tile: every update lands in the tile its partition holds. None (the
        fallback) for any other tiling."""
        target = tilings[0]
        if target.is_replicated() or any(t != target for t in tilings):
            return None
        count = (len(op.operands) - 1) // 2
        n = numbers(op, "dimension_numbers")
        operand_shape, indices_shape, update_shape = (list(self.env[op.operands[k]].shape) for k in (0, count, count + 1))
        window, inserted = n.get("update_window_dims", []), n.get("inserted_window_dims", [])
        input_batching, indices_batching = n.get("input_batching_dims", []), n.get("scatter_indices_batching_dims", [])
        vector_dim = n["index_vector_dim"]
        update_of: list[int | None] = [None] * len(update_shape)  # the operand dim each update dim follows
        indices_of: list[int | None] = [None] * len(indices_shape)
        window_operand_dims = [d for d in range(len(operand_shape)) if d not in inserted and d not in input_batching]
        for d, u in zip(window_operand_dims, window):
            if update_shape[u] == operand_shape[d]:
                update_of[u] = d
        scattered = [u for u in range(len(update_shape)) if u not in window]
        for i, u in zip([i for i in range(len(indices_shape)) if i != vector_dim], scattered):
            if i in indices_batching:
                update_of[u] = indices_of[i] = input_batching[indices_batching.index(i)]
        if any(t > 1 and d not in update_of for d, t in enumerate(target.tiles)):
            return None
        operands = ([self.get(v, target) for v in op.operands[:count]] + [self.get(op.operands[count], target.restrict(indices_of))]
                    + [self.get(v, target.restrict(update_of)) for v in op.operands[count + 1:]])
        new = self.b.rebuild(op, operands, [self.local_type(r.type, t) for r, t in zip(op.results, tilings)])
        self.finish_results(op, new, tilings)
        return "local: each partition's updates land in its tile (window or batching dims)"

    def gather(self, op: ir.Operation, tilings) -> str | None:
        """A gather tiled only on result dims that are operand dims it slices whole (offset
        dims) or batch dims of its indices (with the operand's batching dims tied to them)
        runs on each partition's tile: the indices of its batch, the operand's tile of those
        dims (whole elsewhere), those slices made local. None (the fallback) for any other
        tiling: the permutation loop of a batch-sharded `lu` gathered its pivots."""
        target = tilings[0]
        if target is None or target.partial is not None or target.is_replicated():
            return None
        n = numbers(op, "dimension_numbers")
        operand_shape, indices_shape = list(self.env[op.operands[0]].shape), list(self.env[op.operands[1]].shape)
        result_shape, sizes = shape_of(op.results[0].type), _ints(op, "slice_sizes")
        offset_dims, collapsed = n.get("offset_dims", []), n.get("collapsed_slice_dims", [])
        operand_batching, indices_batching = n.get("operand_batching_dims", []), n.get("start_indices_batching_dims", [])
        vector_dim = n["index_vector_dim"]
        operand_of: list[int | None] = [None] * len(operand_shape)  # the result dim each operand dim follows
        indices_of: list[int | None] = [None] * len(indices_shape)
        window = [d for d in range(len(operand_shape)) if d not in collapsed and d not in operand_batching]
        for d, r in zip(window, offset_dims):
            if sizes[d] == operand_shape[d]:
                operand_of[d] = r
        batch_results = [r for r in range(len(result_shape)) if r not in offset_dims]
        for i, r in zip([i for i in range(len(indices_shape)) if i != vector_dim], batch_results):
            indices_of[i] = r
            if i in indices_batching:
                operand_of[operand_batching[indices_batching.index(i)]] = r
        if any(t > 1 and r not in operand_of + indices_of for r, t in enumerate(target.tiles)):
            return None
        operand = self.get(op.operands[0], target.restrict(operand_of))
        local_operand = shape_of(operand.type)
        local_sizes = [local_operand[d] if d in window and operand_of[d] is not None else size for d, size in enumerate(sizes)]
        new = self.b.rebuild(op, [operand, self.get(op.operands[1], target.restrict(indices_of))],
                             [self.local_type(op.results[0].type, target)], slice_sizes=ir.DenseI64ArrayAttr.get(local_sizes))
        self.finish_results(op, new, tilings)
        return "local: tiled on dims it slices whole or batch dims of its indices"

    def carried(self, value: ir.Value, tiling: Tiling | None) -> Tiling | None:
        """A loop carries an unreduced operand unreduced (an accumulator of partial sums, as
        a scan over microbatches keeps its gradients), where its tiling can hold the labels."""
        local = self.env[value]
        if tiling is None or local.tiling is None or local.tiling.partial is None or tiling.partial is not None:
            return tiling
        return tiling.with_partial(local.tiling.partial) if tiling.holds_every_label(local.tiling.partial) else tiling

    def while_loop(self, op: ir.Operation, tilings) -> str:
        tilings = [self.carried(v, t) for v, t in zip(op.operands, tilings)]
        operands = [self.get(v, t) if t is not None else self.env[v].value for v, t in zip(op.operands, tilings)]
        new = self.b.rebuild(op, operands, [self.local_type(r.type, t) for r, t in zip(op.results, tilings)])
        cond, body = new.regions[0].blocks[0], new.regions[1].blocks[0]
        for block in (cond, body):
            for argument, tiling in zip(block.arguments, tilings):
                self.define(argument, argument, tiling)
                argument.set_type(self.local_type(argument.type, tiling))

        def finish_cond(terminator):
            terminator.operands[0] = self.get(terminator.operands[0], self.replicated(terminator.operands[0]))

        def finish_body(terminator):
            for index, value in enumerate(list(terminator.operands)):
                terminator.operands[index] = self.get(value, tilings[index]) if tilings[index] is not None else self.env[value].value

        self.partition_block(cond, finish_cond)
        self.partition_block(body, finish_body)
        self.finish_results(op, new, tilings)
        return "while: carried values keep their shardings, body and cond partitioned"

    def conditional(self, op: ir.Operation, tilings) -> str | None:
        """Each branch function partitioned in place, as a while's body is: its arguments keep
        the tilings of the operands handed to them, its returned values reshard to the
        conditional's results. A branch function another op calls too is left to the
        fallback (partitioned here, the other caller would get local shapes it did not ask for)."""
        branches = [ir.FlatSymbolRefAttr(b).value for b in ir.ArrayAttr(op.attributes["branch_computations"])]
        functions = {function_name(f): f for f in module_functions(self.module)}
        if len(set(branches)) != len(branches) or any(self.callers(name) != 1 for name in branches):
            return None
        index = op.operands[0]
        operands = [self.get(index, self.replicated(index))] + [self.env[v].value for v in op.operands[1:]]
        result_types = [self.local_type(r.type, t) for r, t in zip(op.results, tilings)]
        new = self.b.rebuild(op, operands, result_types)
        counts = list(ir.DenseI64ArrayAttr(op.attributes["branch_operand_counts"]))
        starts = np.cumsum([1] + counts)
        for name, start, count in zip(branches, starts, counts):
            function = functions[name]
            block = function.regions[0].blocks[0]
            for argument, value in zip(block.arguments, op.operands[start:start + count]):
                local = self.env[value]
                self.define(argument, argument, local.tiling)
                argument.set_type(local.value.type)

            def finish(terminator):
                for position, value in enumerate(list(terminator.operands)):
                    terminator.operands[position] = self.get(value, tilings[position]) if tilings[position] is not None else self.env[value].value

            self.partition_block(block, finish)
            function.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get([a.type for a in block.arguments], result_types))
        self.finish_results(op, new, tilings)
        return "conditional: operands keep their shardings into the branches, each branch partitioned"

    def passthrough(self, op: ir.Operation, tilings) -> str | None:
        """A slice, pad, concatenate, reverse, sort or dynamic (update-)slice whose tiled dims
        are dims it does not touch (`passthrough_dims`: a full-range slice, no padding, not the
        concatenated, reversed or sorted dim, a full-size dynamic slice) runs on each
        partition's tile, as XLA's partitioner keeps such dims: operands resharded to the
        result's tiling, scalars whole, and the sizes the op names for those dims made local.
        None (the fallback) for any other sharding: qr's `pad` of its Householder vectors
        gathered a batch-sharded stack."""
        first = tilings[0]
        kept = passthrough_dims(op, [list(self.env[v].shape) if _ranked(v) else [] for v in op.operands])
        if first is None or kept is None or any(t != first for t in tilings) or not tiled_only_on(first, kept):
            return None
        if (first.partial is None and first.is_replicated()) or (first.partial is not None and op.name not in LINEAR_PASSTHROUGH):
            return None
        operands = [self.get(v, first if len(self.env[v].shape) == first.rank else self.replicated(v)) if _ranked(v)
                    else self.env[v].value for v in op.operands]
        result_types = [self.local_type(r.type, t) for r, t in zip(op.results, tilings)]
        local_shape = shape_of(result_types[0])
        changed = {}
        if op.name == "xhlo.slice":
            changed["limit_indices"] = ir.DenseI64ArrayAttr.get(
                [local_shape[d] if first.tiles[d] > 1 else limit for d, limit in enumerate(_ints(op, "limit_indices"))])
        elif op.name == "xhlo.dynamic_slice":
            changed["slice_sizes"] = ir.DenseI64ArrayAttr.get(
                [local_shape[d] if first.tiles[d] > 1 else size for d, size in enumerate(_ints(op, "slice_sizes"))])
        new = self.b.rebuild(op, operands, result_types, **changed)
        self.finish_results(op, new, tilings)
        return f"local: dims {', '.join(str(d) for d, t in enumerate(first.tiles) if t > 1)} pass through"

    def custom_call(self, op: ir.Operation, tilings) -> str | None:
        """A call that runs matrix by matrix over its batch (jax's LAPACK calls, `num_batch_dims`):
        `batch_parallel`; None (the fallback) for any other call."""
        count = declared_batch_dims(op)  # the operands may be local values already: their shapes say nothing
        return None if count is None else self.batch_parallel(op, tilings, count, "the call")

    def batch_parallel(self, op: ir.Operation, tilings, count: int, what: str) -> str | None:
        """An op whose operands and results share `count` leading batch dims and that computes
        each batch element on its own, its results sharded on batch dims only, runs on each
        partition's part of the batch, as XLA does: operands resharded to the results' batch
        tiling, no gather. None (the fallback) for any other sharding."""
        first = tilings[0] if tilings else None
        if count < 1 or first is None or first.partial is not None or any(t > 1 for t in first.tiles[count:]) \
                or all(t == 1 for t in first.tiles[:count]):
            return None

        def batch_tiling(rank: int) -> Tiling:
            return first.restrict(list(range(count)) + [None] * (rank - count))

        if any(list(self.env[v].shape)[:count] != shape_of(op.results[0].type)[:count] for v in op.operands):
            return None
        operands = [self.get(v, batch_tiling(len(self.env[v].shape))) for v in op.operands]
        result_tilings = [batch_tiling(len(shape_of(r.type))) for r in op.results]
        new = self.b.rebuild(op, operands, [self.local_type(r.type, t) for r, t in zip(op.results, result_tilings)])
        for result, local, local_tiling, tiling in zip(op.results, new.results, result_tilings, tilings):
            self.define(result, reshard(self.b, local, shape_of(result.type), local_tiling, tiling), tiling)
        return f"local: {what} on each partition's part of its {count} batch dim(s)"

    def callers(self, name: str) -> int:
        """How many ops of the module name the function `name` as a branch or a callee."""
        count = 0
        for op in nested_ops(self.module.operation):
            for key in ("branch_computations", "callee"):
                if key not in op.attributes:
                    continue
                attribute = op.attributes[key]
                symbols = list(ir.ArrayAttr(attribute)) if isinstance(attribute, ir.ArrayAttr) else [attribute]
                count += sum(1 for symbol in symbols if ir.FlatSymbolRefAttr(symbol).value == name)
        return count


def captured_values(op: ir.Operation) -> list[ir.Value]:
    """The values the ops in `op`'s regions read that are defined outside `op`."""
    if not len(op.regions):
        return []
    inner = nested_ops(op)
    inside = set(inner)
    captured = []
    for nested in (nested for nested in inner if nested != op):
        for operand in nested.operands:
            owner = operand.owner
            definer = owner.owner.operation if isinstance(owner, ir.Block) else owner.operation
            if definer not in inside and operand not in captured:
                captured.append(operand)
    return captured


def reshape_source(source_shape, target_shape, tiling: Tiling) -> Tiling | None:
    """The operand tiling whose tiles a reshape maps onto `tiling`'s: each tiled result dim
    must start where an operand dim starts (equal products of the dims before them) and both
    dims must divide into the tiles (padded tiles do not map through); None otherwise."""
    dims: list[int | None] = [None] * len(source_shape)
    prefix_source = [int(np.prod(source_shape[:i], dtype=np.int64)) for i in range(len(source_shape))]
    for d, t in enumerate(tiling.tiles):
        if t == 1:
            continue
        prefix = int(np.prod(target_shape[:d], dtype=np.int64))
        candidates = [i for i, p in enumerate(prefix_source) if p == prefix and source_shape[i] > 1]
        if not candidates or source_shape[candidates[0]] % t or target_shape[d] % t or dims[candidates[0]] is not None:
            return None
        dims[candidates[0]] = d
    return tiling.restrict(dims)


# Ops linear in each operand separately: an unreduced operand's partial sums times the
# others whole are the partial sums of the result.
SCALING_OPS = ("xhlo.multiply", "xhlo.divide", "xhlo.dot", "xhlo.convolution")

# Ops whose handlers leave the partial sums of reduced dims (a scatter-add's updates)
# unsummed where the result is unreduced over them.
REDUCING_OPS = ("xhlo.dot", "xhlo.reduce", "xhlo.scatter")

HANDLERS = {
    "xhlo.constant": _Partitioner.constant,
    "xhlo.iota": _Partitioner.iota,
    "xhlo.broadcast": _Partitioner.broadcast,
    "xhlo.transpose": _Partitioner.transpose,
    "xhlo.reshape": _Partitioner.reshape,
    "xhlo.copy": _Partitioner.elementwise,
    "xhlo.optimization_barrier": _Partitioner.barrier,
    "xhlo.dot": _Partitioner.dot,
    "xhlo.reduce": _Partitioner.reduce,
    "xhlo.while": _Partitioner.while_loop,
    "xhlo.scatter": _Partitioner.scatter,
    "xhlo.gather": _Partitioner.gather,
    "xhlo.conditional": _Partitioner.conditional,
    "xhlo.custom_call": _Partitioner.custom_call,
    **{name: _Partitioner.passthrough for name in ("xhlo.slice", "xhlo.pad", "xhlo.concatenate", "xhlo.reverse", "xhlo.sort",
                                                   "xhlo.dynamic_slice", "xhlo.dynamic_update_slice")},
    "xhlo.convolution": convolution,
    "xhlo.reduce_window": reduce_window,
}
