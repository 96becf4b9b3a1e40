"""xhlo-sharding-remover: on one partition, sharding annotations are identities (XLA's
ShardingRemover, which its CPU pipeline runs when the partition count is 1).

jax puts `@Sharding` custom calls into ordinary programs (`jax.random` constrains its key;
`with_sharding_constraint` and `sdy.sharding_constraint` become one), and `shard_map` marks
its edges with `@SPMDFullToShardShape` / `@SPMDShardToFullShape`. When the module runs on a
single partition each of them returns its operand: its uses read the operand instead and the
call goes. On more partitions they are left for the SPMD partitioner, as is every
`xhlo.sharding` attribute on other ops. The oracle (`runtime/oracle.py`) forwards the
StableHLO form of the same calls with `forward_annotations`. Changed: any annotation removed.
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.dialects.xhlo.config import read_config
from mlirxla.ir_queries import ops_where
from mlirxla.mlir import ir

from .erasure import erase, live_ops
from .pass_base import ModulePass

ANNOTATIONS = frozenset({"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape"})
CUSTOM_CALLS = frozenset({"xhlo.custom_call", "stablehlo.custom_call"})


def is_annotation(op: ir.Operation) -> bool:
    return op.name in CUSTOM_CALLS and ir.StringAttr(op.attributes["call_target_name"]).value in ANNOTATIONS


def forward_annotations(module: ir.Module) -> bool:
    """Every annotation whose result has its operand's type reads as its operand; whether any did."""
    changed = False
    for call in live_ops(ops_where(module, is_annotation)):
        if len(call.operands) != 1 or len(call.results) != 1 or call.operands[0].type != call.results[0].type:
            continue
        call.results[0].replace_all_uses_with(call.operands[0])
        erase(call)
        changed = True
    return changed


@dataclass(frozen=True)
class ShardingRemoverPass(ModulePass):
    """Forwards the operand of every sharding annotation when the module has one partition."""

    name: ClassVar[str] = "xhlo-sharding-remover"
    summary: ClassVar[str] = "on one partition, @Sharding and the shard_map shape calls become identities"

    def run(self, module: ir.Module) -> bool:
        return read_config(module).partition_count == 1 and forward_annotations(module)
