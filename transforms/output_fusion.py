"""xhlo-output-fusion: a dot or convolution takes in the elementwise kernel that consumes its
result (XLA's output fusion: a library call plus its epilogue, such as a bias add and a relu,
as XLA:CPU's YNNPACK and oneDNN fusions and XLA:GPU's cuBLAS/cuDNN epilogues make it).

Runs after priority and multi-output fusion. In every fusible computation, a dot or
convolution fuses with its consumer when

- its result has exactly one user, and that user is a kernel (not the return);
- the consumer is an elementwise op or a `loop` fusion with one result of the library call's
  shape, and it reads the library call's result only elementwise at the index it writes (so
  the backend can run the epilogue over the library call's output in place, tile by tile);
- no other path of uses leads from the library call to the consumer (no cycle);
- the merge has at most 64 operands.

The result is an `xhlo.fusion` of kind `output`, named `<dot|convolution>_<root>_fusion`.
Every merge and refusal is logged (`output-fusion-decisions.txt`); `mlirxla-opt
--explain-fusion` reads it too. Changed: any fusion made.
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.mlir import ir

from .erasure import live_ops
from .fusion_legality import (
    ELEMENTWISE,
    LIBRARY_CALLS,
    FusionLimits,
    elementwise_read_operands,
    fused_operand_count,
    fusion_kind,
    kind_of,
    reachable,
    users_in_block,
)
from .pass_base import ModulePass, PassResult
from .priority_fusion import TERMINATORS, Decision, FusionDecisions, Namer, build_fusion, describe, fusible_blocks


def epilogue_refusal(call: ir.Operation, consumer: ir.Operation, limits: FusionLimits) -> str | None:
    """None when `consumer` can run as the epilogue of the library call `call`, else why not."""
    result = call.results[0]
    if consumer.name in TERMINATORS:
        return "its result is only returned"
    if len(consumer.results) != 1 or consumer.results[0].type != result.type:
        return "the consumer does not compute one value of the library call's shape"
    if kind_of(consumer) in ELEMENTWISE:
        pass
    elif kind_of(consumer) == "fusion" and fusion_kind(consumer) == "loop":
        if result not in elementwise_read_operands(consumer):
            return "the consumer reads the library call's result other than elementwise"
    else:
        return f"the consumer ({kind_of(consumer)}) is neither elementwise nor a loop fusion"
    if reachable(call, consumer, skip_direct=True):
        return "fusion would create a cycle"
    operands = fused_operand_count(call, consumer)
    if operands > limits.max_operands:
        return f"the fusion would have {operands} operands, more than the maximum of {limits.max_operands}"
    return None


@dataclass(frozen=True)
class OutputFusionPass(ModulePass):
    """Fuses each dot or convolution with the elementwise kernel consuming its result."""

    name: ClassVar[str] = "xhlo-output-fusion"
    summary: ClassVar[str] = "output fusion: a dot or convolution plus the elementwise kernel that consumes it"

    def run(self, module: ir.Module) -> PassResult:
        decisions: list[Decision] = []
        limits = FusionLimits()
        namer = Namer(module)
        changed = False
        with module.context, ir.Location.unknown():
            for block in fusible_blocks(module):
                for op in live_ops(block.operations):
                    if kind_of(op) in LIBRARY_CALLS:
                        changed = fuse_epilogue(op, limits, namer, decisions) or changed
        return PassResult(changed, FusionDecisions("output-fusion-decisions.txt", tuple(decisions)))


def fuse_epilogue(call: ir.Operation, limits: FusionLimits, namer: Namer, decisions: list[Decision]) -> bool:
    users = users_in_block(call)
    if len(users) != 1:
        if users:
            decisions.append(Decision("refused", describe(call), describe(users[0]), f"its result has {len(users)} users"))
        return False
    consumer = users[0]
    reason = epilogue_refusal(call, consumer, limits)
    if reason:
        decisions.append(Decision("refused", describe(call), describe(consumer), reason))
        return False
    call_text, consumer_text = describe(call), describe(consumer)
    fusion = build_fusion([call, consumer], list(consumer.results), namer, kind="output")
    decisions.append(Decision("fused", call_text, consumer_text, fusion=describe(fusion)))
    return True
