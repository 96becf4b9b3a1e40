"""Collectives, send/recv, infeed/outfeed and the device's ids as collective thunks
(`runtime/collectives.py`), their attributes plain data read off the op: the process groups
expanded to device ids for the module's replica and partition counts
(`dialects/xhlo/process_groups.py`), so that the thunk sequence says who meets whom; the
dimensions; the reducer's kind. Token operands and results take no memory and are left out.
"""

from mlirxla.dialects.xhlo.config import ModuleConfig, read_config
from mlirxla.dialects.xhlo.process_groups import channel_id, op_process_groups, permute_pairs, process_groups
from mlirxla.errors import MlirxlaError, location_text
from mlirxla.mlir import ir
from mlirxla.runtime.collectives import REDUCERS
from mlirxla.runtime.executable import TOKEN_TYPE, TensorSpec
from mlirxla.runtime.thunks import CollectiveThunk
from mlirxla.transforms.fusion_legality import kind_of

from .host_calls import computation_combiner


def reducer(op: ir.Operation) -> str:
    kind = computation_combiner(op.regions[0])
    if kind not in REDUCERS:
        raise MlirxlaError(f"xhlo.{kind_of(op)}: the cpu backend reduces with one elementwise op of the two arguments "
                           f"({', '.join(REDUCERS)}), not this computation", location_text(op.location))
    return kind


def integer(op: ir.Operation, name: str) -> int:
    return ir.IntegerAttr(op.attributes[name]).value


def with_channel(op: ir.Operation, attributes: dict) -> dict:
    channel = channel_id(op)
    return attributes | {"channel": channel} if channel is not None else attributes


def grouped(op: ir.Operation, config: ModuleConfig) -> dict:
    return with_channel(op, {"groups": op_process_groups(op, config)})


def permute_attributes(op: ir.Operation, config: ModuleConfig) -> dict:
    """Every device of a permutation's group meets (all replicas of a partition without a
    channel, all partitions of a replica with one); `pairs` say who takes whose operand."""
    mode = "cross_replica" if channel_id(op) is None else "cross_partition"
    pairs = [list(pair) for pair in permute_pairs(op, config)]
    return with_channel(op, {"groups": process_groups(mode, [], config), "pairs": pairs})


ATTRIBUTES = {
    "all_reduce": lambda op, config: grouped(op, config) | {"reducer": reducer(op)},
    "collective_reduce": lambda op, config: grouped(op, config) | {"reducer": reducer(op)},
    "all_gather": lambda op, config: grouped(op, config) | {"dimension": integer(op, "all_gather_dim")},
    "reduce_scatter": lambda op, config: grouped(op, config) | {"reducer": reducer(op),
                                                                "dimension": integer(op, "scatter_dimension")},
    "all_to_all": lambda op, config: grouped(op, config) | {
        name: integer(op, name) for name in ("split_dimension", "concat_dimension", "split_count")},
    "collective_broadcast": lambda op, config: grouped(op, config) | (
        {"dynamic_root": True} if "has_dynamic_root" in op.attributes else {}),
    "collective_permute": permute_attributes,
    "replica_id": lambda op, config: {},
    "partition_id": lambda op, config: {},
    "send": lambda op, config: {"channel": channel_id(op) or 0},
    "recv": lambda op, config: {"channel": channel_id(op) or 0},
    "infeed": lambda op, config: {},
    "outfeed": lambda op, config: {},
}


def emit_collective(emitter, op: ir.Operation) -> list:
    kind = kind_of(op)
    attributes = ATTRIBUTES[kind](op, read_config(emitter.module))
    name = emitter.name_of(op)
    emitter.decisions.append(f"{name}: {kind} as a collective thunk {attributes}")

    def specs(values):
        return tuple((emitter.slice_of(v), tuple(ir.RankedTensorType(v.type).shape), TensorSpec.of(v.type).dtype)
                     for v in values if str(v.type) != TOKEN_TYPE)

    return [CollectiveThunk(name, kind, specs(op.operands), specs(op.results), attributes)]
