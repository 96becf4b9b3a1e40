"""xhlo-all-reduce-combiner: independent all-reduces that could run as one become one
variadic all-reduce (XLA's `AllReduceCombiner`), after the SPMD partitioner.

What it decides, and why:

* **Which may combine**: all-reduces in one block with the same reducer (one binary op, as
  the partitioner and jax write them), the same element type (a variadic all-reduce has one
  reducer computation, typed by its element), the same groups, the same channel kind (with
  or without a channel handle, of the same type) and the same `use_global_device_ids`:
  then one rendezvous does the work of several, each operand reduced on its own as before,
  so results are bitwise unchanged. The mechanics (independence, placement, one group at a
  time) are `transforms/collective_combining.py`'s.
* **How many**: up to `threshold_bytes` of results (30 MiB, XLA's GPU default
  `xla_gpu_all_reduce_combine_threshold_bytes`; XLA:CPU does not combine) and
  `threshold_count` ops (256, XLA's default count, or fewer when `MLIRXLA_XHLO_SLOTS` gives
  the op fewer slots).

The report (`all-reduce-combiner.txt`) lists each combined group and the count of
all-reduces before and after, for modules that have any. Changed: some group combined.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Hashable

from mlirxla.dialects.xhlo.ops import WIDE
from mlirxla.dialects.xhlo.types import element_of
from mlirxla.mlir import ir

from .collective_combining import Combining, CombinerReport, combine_module
from .pass_base import ModulePass, PassResult
from .spmd_partitioner import reducer_kind

THRESHOLD_BYTES = 30 * 1024 * 1024
THRESHOLD_COUNT = min(256, WIDE)  # XLA's default count, within the op's slots


def channel_kind(op: ir.Operation) -> tuple:
    """Whether `op` has a channel and of which type, and whether its ids are global."""
    handle = None
    if "channel_handle" in op.attributes:
        handle = ir.IntegerAttr(ir.DictAttr(op.attributes["channel_handle"])["type"]).value
    return handle, "use_global_device_ids" in op.attributes


def all_reduce_key(op: ir.Operation) -> Hashable | None:
    kind = reducer_kind(op.regions[0])
    elements = {str(element_of(v.type)) for v in op.operands}
    if kind is None or len(elements) != 1 or any(not isinstance(v.type, ir.RankedTensorType) for v in op.operands):
        return None
    return kind, elements.pop(), str(op.attributes["replica_groups"]), channel_kind(op)


@dataclass(frozen=True)
class AllReduceCombinerPass(ModulePass):
    """Combines independent all-reduces of one reducer, type, groups and channel kind (module docstring)."""

    name: ClassVar[str] = "xhlo-all-reduce-combiner"
    summary: ClassVar[str] = "combine independent all-reduces with the same reducer and groups into one variadic all-reduce"
    threshold_bytes: int = THRESHOLD_BYTES
    threshold_count: int = THRESHOLD_COUNT

    def run(self, module: ir.Module) -> PassResult:
        report = CombinerReport(self.name, "all-reduce-combiner.txt", "all-reduce", self.threshold_bytes)
        combining = Combining("xhlo.all_reduce", all_reduce_key, self.threshold_bytes, self.threshold_count)
        return combine_module(module, combining, report)
