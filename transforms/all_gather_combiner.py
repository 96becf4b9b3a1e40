"""xhlo-all-gather-combiner: independent all-gathers that could run as one become one
variadic all-gather (XLA's `AllGatherCombiner`), after the SPMD partitioner.

What it decides, and why:

* **Which may combine**: all-gathers in one block along the same dimension (XLA's
  `combine_by_dim`: one `all_gather_dim` per op), of one element type, with the same groups,
  the same channel kind and the same `use_global_device_ids`. One rendezvous then does the
  work of several and every result is the same concatenation as before. The runtime would
  gather mixed types too, but MHLO's all_gather takes one element type, and jax makes HLO of
  the partitioned program through MHLO (`compiled.as_text()` failed with "failed to convert
  to MHLO" on the jvp of a batch-sharded `lu`, whose int32 pivots met f32 tangents). The mechanics (independence, placement, one group at a
  time) are `transforms/collective_combining.py`'s.
* **How many**: up to `threshold_bytes` of results (30 MiB, XLA's GPU default
  `xla_gpu_all_gather_combine_threshold_bytes`) and `threshold_count` ops (256).

The report (`all-gather-combiner.txt`) lists each combined group and the count of
all-gathers before and after, for modules that have any. Changed: some group combined.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Hashable

from mlirxla.dialects.xhlo.types import element_of
from mlirxla.mlir import ir

from .all_reduce_combiner import THRESHOLD_BYTES, THRESHOLD_COUNT, channel_kind
from .collective_combining import Combining, CombinerReport, combine_module
from .pass_base import ModulePass, PassResult


def all_gather_key(op: ir.Operation) -> Hashable | None:
    elements = {str(element_of(v.type)) for v in op.operands}
    if len(elements) != 1 or any(not isinstance(v.type, ir.RankedTensorType) for v in op.operands):
        return None
    return ir.IntegerAttr(op.attributes["all_gather_dim"]).value, elements.pop(), str(op.attributes["replica_groups"]), channel_kind(op)


@dataclass(frozen=True)
class AllGatherCombinerPass(ModulePass):
    """Combines independent all-gathers of one dimension, groups and channel kind (module docstring)."""

    name: ClassVar[str] = "xhlo-all-gather-combiner"
    summary: ClassVar[str] = "combine independent all-gathers along the same dimension and groups into one variadic all-gather"
    threshold_bytes: int = THRESHOLD_BYTES
    threshold_count: int = THRESHOLD_COUNT

    def run(self, module: ir.Module) -> PassResult:
        report = CombinerReport(self.name, "all-gather-combiner.txt", "all-gather", self.threshold_bytes)
        combining = Combining("xhlo.all_gather", all_gather_key, self.threshold_bytes, self.threshold_count)
        return combine_module(module, combining, report)
