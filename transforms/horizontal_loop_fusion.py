"""xhlo-horizontal-loop-fusion: independent loop kernels read by one consumer become one
fusion (XLA:GPU's HorizontalLoopFusion), on the cuda pipeline, after multi-output and output
fusion.

On a GPU a small kernel costs its launch more than its work, and a kernel of a few blocks
leaves most multiprocessors idle: an Adam step over an MLP's parameters is a kernel per
weight and per bias (33 launches for 16 arrays). XLA fuses such kernels side by side, with
no data passing between them; so does this pass, and the cuda backend runs the loop nests of
such a fusion as one launch, each on its own range of blocks (`backends/cuda/launch_merging.py`).

The candidates, in every fusible computation, are the kernels whose results are all read by
one consumer (or by it and the block's return), found from that consumer's operands, as XLA
finds them; none then reads another's result, so merging them makes no cycle. A candidate is

- a loop fusion, or a single elementwise op (not a reduction, library call or copy:
  `multi_output_fusion.kernel_problem` says which kernels take part in any merge), holding
  no transpose (a kernel of one transposing nest goes to the transpose emitter; merged, it
  would be the loop emitter's, its reads or writes a row apart);
- small enough to be bound by its launch rather than its work: at most 8192 x 8192 elements
  in its first result and 128 ops (XLA's thresholds for loop fusions).

They are merged in block order in batches of fewer than 32 results (XLA's fusion batch
size), at most 64 operands (the fusion op's slots) and kernel arguments of under 4000 bytes
(CUDA's parameter space as XLA counts it: 8 bytes a pointer). Unlike XLA's, the results may
differ in shape and element type: the launch dispatches on the block index, nothing is
concatenated. The fusion is named `horizontal_loop_fusion` (numbered). Every batch and every candidate passed over for its kind or size is logged
(`horizontal-loop-fusion-decisions.txt`). Changed: any fusion made.
"""

import functools
from dataclasses import dataclass
from typing import ClassVar

from mlirxla.ir_queries import defining_op
from mlirxla.mlir import ir

from .erasure import live_ops
from .fusion_legality import ELEMENTWISE, FusionLimits, block_order, element_count, fused_ops, fusion_kind, kind_of, users_in_block
from .multi_output_fusion import kernel_problem
from .pass_base import ModulePass, PassResult, TextReport, rendering_reports
from .priority_fusion import Namer, build_fusion, describe, fusible_blocks

MAX_ELEMENTS = 8192 * 8192
MAX_OPS = 128
MAX_RESULTS = 31  # XLA stops a batch at 32 outputs
MAX_PARAMETER_BYTES = 4000
POINTER_BYTES = 8


@dataclass(frozen=True)
class HorizontalLoopFusionPass(ModulePass):
    """Merges independent loop kernels read by one consumer into one fusion."""

    name: ClassVar[str] = "xhlo-horizontal-loop-fusion"
    summary: ClassVar[str] = "horizontal loop fusion: independent loop kernels read by one consumer, one launch (GPU)"

    def run(self, module) -> PassResult:
        log: list[str] = []
        limits = FusionLimits()
        namer = Namer(module)
        changed = False
        with module.context:
            for block in fusible_blocks(module):
                terminator = list(block.operations)[-1].operation
                for consumer in live_ops(block.operations):
                    for batch in batches(candidates(consumer, terminator, limits, log), limits):
                        described = ", ".join(describe(member) for member in batch)
                        fusion = build_fusion(batch, [r for member in batch for r in member.results], namer, kind="loop")
                        fusion.attributes["name"] = ir.StringAttr.get(namer.unique("horizontal_loop_fusion"))
                        log.append(f"merged {described} (read by {describe(consumer)}) -> {describe(fusion)}")
                        changed = True
        if not rendering_reports():
            return PassResult(changed)
        merged = sum(line.startswith("merged") for line in log)
        text = f"# horizontal loop fusion: {merged} fusion(s) made, {len(log) - merged} candidate(s) kept apart\n"
        return PassResult(changed, TextReport({"horizontal-loop-fusion-decisions.txt": text + "".join(f"{line}\n" for line in log)}))


def candidates(consumer, terminator, limits: FusionLimits, log: list[str]) -> list:
    """The kernels of `consumer`'s operands that may be merged side by side, in block order."""
    found, seen = [], set()
    for operand in consumer.operands:
        producer = defining_op(operand)
        if producer is None or producer in seen or producer.block != consumer.block:
            continue
        seen.add(producer)
        reason = candidate_problem(producer, consumer, terminator, limits)
        if reason is None:
            found.append(producer)
        elif reason:
            log.append(f"kept {describe(producer)} apart (read by {describe(consumer)}): {reason}")
    return sorted(found, key=functools.cmp_to_key(block_order))


def candidate_problem(op, consumer, terminator, limits: FusionLimits) -> str | None:
    """Why `op` is no candidate ('' where that is the rule, not worth a log line: no kernel of
    its own, or other readers)."""
    if kernel_problem(op, limits) is not None or any(user not in (consumer, terminator) for user in users_in_block(op)):
        return ""
    if op.name == "xhlo.fusion" and fusion_kind(op) != "loop":
        return f"it is a fusion of kind {fusion_kind(op)}"
    if op.name != "xhlo.fusion" and kind_of(op) not in ELEMENTWISE:
        return f"xhlo.{kind_of(op)} is neither a loop fusion nor elementwise"
    if any(kind_of(inner) == "transpose" for inner in fused_ops(op)):
        return "it holds a transpose: alone, the transpose emitter's shared-memory tiles take it"
    if element_count(op.results[0].type) > MAX_ELEMENTS:
        return f"its result has more than {MAX_ELEMENTS} elements: its work outweighs its launch"
    if len(fused_ops(op)) > MAX_OPS:
        return f"it holds more than {MAX_OPS} ops: its work outweighs its launch"
    return None


def batches(kernels: list, limits: FusionLimits) -> list[list]:
    """`kernels` cut, in order, into runs of two or more within the size limits."""
    result, batch = [], []
    for kernel in kernels:
        if batch and too_large(batch + [kernel], limits):
            result.append(batch)
            batch = []
        batch.append(kernel)
    result.append(batch)
    return [b for b in result if len(b) > 1]


def too_large(batch: list, limits: FusionLimits) -> bool:
    results = sum(len(op.results) for op in batch)
    operands = len({value for op in batch for value in op.operands})
    return (results > MAX_RESULTS or operands > limits.max_operands
            or (operands + results) * POINTER_BYTES >= MAX_PARAMETER_BYTES)
