"""xhlo-sharding-remover: on one partition, sharding annotations are identities (XLA's
ShardingRemover, which its CPU pipeline runs when the partition count is 1).

jax puts `@Sharding` custom calls into ordinary programs (`jax.random` constrains its key;
`with_sharding_constraint` and `sdy.sharding_constraint` become one), and `shard_map` marks
its edges with `@SPMDFullToShardShape` / `@SPMDShardToFullShape`. When the module runs on a
single partition each of them returns its operand: its uses read the operand instead and the
call goes. On more partitions they are left for the SPMD partitioner, as is every
`xhlo.sharding` attribute on other ops; `partitioning_need` says what in a module for several
partitions needs one (a module without such annotations is already each device's program,
and one manual over every device becomes it by `xhlo-manual-partitioner`). The oracle (`runtime/oracle.py`) forwards the
StableHLO form of the same calls with `forward_annotations`. Changed: any annotation removed.
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.dialects.xhlo.config import read_config
from mlirxla.dialects.xhlo.sharding import parse_attribute
from mlirxla.errors import location_text
from mlirxla.ir_queries import first_op_where, module_functions, ops_where
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


SHARDING = "xhlo.sharding"


def is_tiled(attr: ir.Attribute) -> bool:
    sharding = parse_attribute(attr)
    return any(leaf.kind == "tiled" for leaf in (sharding.elements if sharding.kind == "tuple" else (sharding,)))


def tiled_function_value(module: ir.Module) -> str | None:
    for function in module_functions(module):
        for key, what in (("arg_attrs", "argument"), ("res_attrs", "result")):
            entries = ir.ArrayAttr(function.attributes[key]) if key in function.attributes else []
            for index, entry in enumerate(entries):
                attributes = ir.DictAttr(entry)
                if SHARDING in attributes and is_tiled(attributes[SHARDING]):
                    name = ir.StringAttr(function.attributes["sym_name"]).value
                    return f"{what} #{index} of @{name} is sharded {ir.StringAttr(attributes[SHARDING]).value}"
    return None


def partitioning_need(module: ir.Module) -> str | None:
    """What in `module` needs the SPMD partitioner: on more than one partition, a sharding
    annotation or a tiled `xhlo.sharding`; None when every device runs the module as written."""
    if read_config(module).partition_count == 1:
        return None
    annotation = first_op_where(module, is_annotation)
    if annotation is not None:
        target = ir.StringAttr(annotation.attributes["call_target_name"]).value
        return f"its @{target} annotation at {location_text(annotation.location)}"
    if (value := tiled_function_value(module)) is not None:
        return value
    tiled = first_op_where(module, lambda op: SHARDING in op.attributes and is_tiled(op.attributes[SHARDING]))
    if tiled is not None:
        return f"{tiled.name} at {location_text(tiled.location)} is sharded {ir.StringAttr(tiled.attributes[SHARDING]).value}"
    return None


@dataclass(frozen=True)
class ShardingRemoverPass(ModulePass):
    """Forwards the operand of every sharding annotation when the module has one partition."""

    name: ClassVar[str] = "xhlo-sharding-remover"
    summary: ClassVar[str] = "on one partition, @Sharding and the shard_map shape calls become identities"

    def run(self, module: ir.Module) -> bool:
        return read_config(module).partition_count == 1 and forward_annotations(module)
