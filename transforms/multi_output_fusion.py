"""xhlo-multi-output-fusion: merge kernels into multi-output fusions (XLA's CPU/GPU
MultiOutputFusion), after priority fusion.

Two rewrites, repeated in every fusible computation (function bodies, while / conditional
bodies) until nothing changes:

- **Sibling fusion.** Kernels (fusions of kind loop/input, or single fusible ops) of one
  block that read a common operand become one fusion whose results are the results of all
  of them, so the common operand is read once; every sibling that may join the first one
  joins in the same merge. Refused when there is a path of uses between them (the
  fusion would create a cycle), when the shared operand is not worth sharing (a constant or a
  scalar), when their shapes are incompatible (the same loop shape: a loop root's shape, or
  the input shape of the reduce a fusion holds; two reductions must also reduce the same dimensions to the same
  shape), when either is rooted in an in-place dynamic-update-slice or is a lone reshape
  (a bitcast once alone: as a sibling it would become a copy), or when the merge is too
  large (ops, operands, results).
- **Producer-consumer fusion.** A producer with other users is fused into a consumer that is
  a reduce (or a fusion holding a reduce: its hero) reducing data of the producer's shape; the producer's value
  becomes an extra output of the fusion, which its other users read, so it is computed once
  and not read back. Refused by `fusion_legality.fusion_refusal` (cycles, both containing a
  reduce, sizes) and by the shape rule above. An elementwise producer (its results, one
  or several, all of one shape) fuses the same way into an elementwise loop consumer whose
  loop has that shape (XLA's GPU multi-output fusion of a producer into a loop fusion): an Adam update's
  new moments, returned and read by the parameter update, then come out of the update's
  kernel, which reads gradient, moments and parameter once and writes the three results,
  instead of a second kernel reading back both moments it just wrote. Refused on a path of
  uses between them other than the direct one (a cycle) and by the size rule. A producer
  whose only user is a fusion of siblings joins it (no extra output): priority fusion kept
  it apart because it would have been duplicated into each sibling (jax's binary search:
  the compare of the gathered midpoints, read by the select of each bound).

The scans and merges run on a Python graph of the block (`multi_output_graph.py`: kernels,
values, use lists and block order as merging one fusion at a time in MLIR left them), and
the fusions left at the end are built once. Merged fusions get kind `input` when a root is a
reduce, else `loop`, and a new unique `name`. Every merge and refusal is logged with its reason; the pass returns the log as its
report (`MultiOutputFusionDecisions`, dumped as `multi-output-fusion-decisions.txt`), kept
only when reports are read (`rendering_reports()`): logging every pair of kernels that share
an unprofitable operand, again on each rescan, was a fifth of the pass.
Changed: any fusion merged.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from mlirxla.dialects.xhlo.ops import FUSION_SLOTS
from mlirxla.ir_queries import defining_op
from mlirxla.mlir import ir
from mlirxla.young_garbage import collection_paused

from .fusion_legality import (
    CHEAP_TO_DUPLICATE,
    ELEMENTWISE,
    NOT_KERNELS,
    FusionLimits,
    contiguous_copy,
    element_count,
    fusion_kind,
    fusion_refusal,
    kind_of,
    not_fusible_reason,
    root_kinds,
)
from .multi_output_graph import Kernel, MultiOutputGraph, Value
from .pass_base import ModulePass, PassReport, PassResult, rendering_reports
from .priority_fusion import Descriptions, Namer, fusible_blocks
from .reshape_to_bitcast import is_reshape

MAX_RESULTS = FUSION_SLOTS  # the xhlo.fusion op's result slots
# what a loop consumer and its producer may hold: elementwise work over one index space, so
# that every output of the merged kernel is written where its loop is
ELEMENTWISE_LOOP = ELEMENTWISE | CHEAP_TO_DUPLICATE


@dataclass
class MofDecision:
    """One multi-output fusion decision."""

    verdict: str  # "fused" | "refused"
    rule: str  # "sibling" | "producer-consumer"
    first: str  # sibling / producer description
    second: str  # sibling / consumer description
    reason: str = ""
    fusion: str = ""

    def line(self) -> str:
        if self.rule == "sibling":
            if self.verdict == "fused":
                return f"sibling fusion: merged {self.first} and {self.second} -> {self.fusion}"
            return f"sibling fusion: kept {self.first} and {self.second} apart: {self.reason}"
        if self.verdict == "fused":
            return f"producer-consumer fusion: fused {self.first} into {self.second} as an extra output -> {self.fusion}"
        return f"producer-consumer fusion: not fused {self.first} into {self.second}: {self.reason}"


def decision_text(log: Sequence[MofDecision]) -> str:
    fused = sum(d.verdict == "fused" for d in log)
    refused = sum(d.verdict == "refused" for d in log)
    return f"# multi-output fusion decisions: {fused} merged, {refused} refused\n" + "".join(d.line() + "\n" for d in log)


@dataclass(frozen=True)
class MultiOutputFusionDecisions(PassReport):
    """The decisions of one run of multi-output fusion."""

    decisions: tuple[MofDecision, ...]

    def dump_files(self) -> dict[str, str]:
        return {"multi-output-fusion-decisions.txt": decision_text(self.decisions)}


# --- shapes ------------------------------------------------------------------------------------


def _shape(value_type: ir.Type) -> tuple | None:
    if isinstance(value_type, ir.RankedTensorType):
        return tuple(ir.RankedTensorType(value_type).shape)
    return None


@dataclass(frozen=True)
class Hero:
    """What decides a kernel's loop: its loop shape, and for reductions what is reduced."""

    loop_shape: tuple | None
    reduction: tuple | None  # (dimensions, result shape) of the first reduce root, or None


def hero_of(roots: list[tuple[ir.Operation | None, ir.Type]], body: list[ir.Operation]) -> Hero:
    """The hero of a kernel whose results are computed by `roots` (the op, or None for a
    parameter it returns; the result's type) and whose body holds the ops `body`."""
    reduces = [root for root, _ in roots if root is not None and root.name == "xhlo.reduce"]
    reduces += [inner for inner in body if inner.name == "xhlo.reduce" and inner not in reduces]
    if reduces:  # the reduction hero, a root or inside the fusion (with an epilogue after it)
        hero = reduces[0]
        dimensions = tuple(ir.DenseI64ArrayAttr(hero.attributes["dimensions"])) if "dimensions" in hero.attributes else ()
        return Hero(_shape(hero.operands[0].type), (dimensions, _shape(hero.results[0].type)))
    return Hero(_shape(roots[0][1]) if roots else None, None)


def shape_problem(hero_a: Hero, hero_b: Hero) -> str | None:
    """None when kernels with heroes `hero_a` and `hero_b` can share one loop, else why not
    (XLA's ShapesCompatibleForMultiOutputFusion)."""
    if hero_a.loop_shape is None or hero_b.loop_shape is None:
        return "a result is not a ranked tensor"
    if hero_a.loop_shape != hero_b.loop_shape:
        return f"incompatible shapes: loop shapes {list(hero_a.loop_shape)} and {list(hero_b.loop_shape)}"
    if hero_a.reduction and hero_b.reduction and hero_a.reduction != hero_b.reduction:
        return "incompatible reductions: different reduced dimensions or result shapes"
    return None


# --- candidates --------------------------------------------------------------------------------


def kernel_problem(op: ir.Operation, limits: FusionLimits) -> str | None:
    """None when `op` may take part in a multi-output fusion, else why not."""
    kind = kind_of(op)
    reason = not_fusible_reason(op, limits)
    if reason:
        return reason
    if kind in NOT_KERNELS:
        return f"xhlo.{kind} is no kernel"
    if kind == "fusion" and fusion_kind(op) not in ("loop", "input"):
        return f"it is a fusion of kind {fusion_kind(op)}"
    if "dynamic_update_slice" in root_kinds(op):
        return "it is rooted in an in-place dynamic-update-slice"
    if contiguous_copy(op) is not None:
        return "it copies a contiguous range of its operand (a memcpy, no kernel)"
    if is_reshape(op):
        return "it is a reshape, a bitcast once alone (no kernel)"
    return None


def size_problem(members: list[Kernel], ops: int, results: int, limits: FusionLimits) -> str | None:
    """Why a fusion of `members`, holding `ops` ops and `results` results, would be too large."""
    if ops > limits.max_fused_ops:
        return f"the fusion would hold {ops} ops, more than the maximum of {limits.max_fused_ops}"
    operands = len(MultiOutputGraph.operand_union(members))
    if operands > limits.max_operands:
        return f"the fusion would have {operands} operands, more than the maximum of {limits.max_operands}"
    if results > MAX_RESULTS:
        return f"the fusion would have {results} results, more than the maximum of {MAX_RESULTS}"
    return None


def shared_operand_problem(shared: Value) -> str | None:
    """XLA's IsProfitableOperand: sharing a constant or a scalar saves no memory traffic."""
    value = shared.value
    if shared.kernel is not None and shared.kernel.op is None:  # a merge's result
        return "the shared operand is a scalar" if element_count(value.type) <= 1 else None
    owner = defining_op(value)
    if owner is not None and owner.name == "xhlo.constant":
        return "the shared operand is a constant"
    if element_count(value.type) <= 1:
        return "the shared operand is a scalar"
    if owner is not None and owner.name == "xhlo.broadcast" and element_count(owner.operands[0].type) <= 1:
        return "the shared operand is a broadcast scalar"
    return None


# --- the pass ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MultiOutputFusionPass(ModulePass):
    """Merges sibling kernels and producer-consumer pairs into multi-output fusions."""

    name: ClassVar[str] = "xhlo-multi-output-fusion"
    summary: ClassVar[str] = "multi-output fusion: sibling kernels sharing an operand, and producers kept as extra outputs of reduce consumers"
    sibling: bool = True
    producer_consumer: bool = True

    def run(self, module: ir.Module) -> PassResult:
        decisions: list[MofDecision] | None = [] if rendering_reports() else None
        limits = FusionLimits()
        namer = Namer(module)
        changed = False
        with module.context, ir.Location.unknown(), collection_paused():
            for block in fusible_blocks(module):
                changed = MergeBlock(block, limits, namer, decisions, self.sibling, self.producer_consumer).run() or changed
        if decisions is None:
            return PassResult(changed)
        return PassResult(changed, MultiOutputFusionDecisions(tuple(decisions)))


class MergeBlock:
    """Multi-output fusion in one block, decided on its `MultiOutputGraph`: scan, merge one
    group of siblings or one producer-consumer pair, scan again (past what the merges left
    unmergeable), until nothing merges; then build the fusions. `log` takes the decisions;
    None: nobody reads them, none is described."""

    def __init__(self, block, limits, namer, log, sibling=True, producer_consumer=True):
        self.limits, self.namer, self.log = limits, namer, log
        self.sibling, self.producer_consumer = sibling, producer_consumer
        self.logged: set = set()
        # (the candidates' descriptions, the reason) of each value whose sharing is no profit:
        # a later scan meeting the same ones would only log refusals already logged
        self.unprofitable: set = set()
        self.describe = Descriptions()
        self.graph = MultiOutputGraph(block)
        self.sibling_fusions: set = set()  # the fusions sibling fusion made (see `producer_consumer_step`)
        # values and kernels a scan found nothing to merge with, until a merge touches them
        # (`unsettle`): each scan after a merge looks at what it may have changed, not at the
        # whole block again (a gradient of 128 layers' stacked weights: 157 scans of 2,600 values)
        self.settled_values: set = set()
        self.settled_producers: set = set()

    # what each kernel is never changes (a merge makes a new kernel): asked once each

    def description(self, kernel: Kernel) -> str:
        facts = kernel.facts
        if "description" not in facts:
            if kernel.op is not None:
                facts["description"] = self.describe(kernel.op)
            else:
                facts["description"] = f"{kernel.name}(fusion) at {self.describe.place(kernel.anchor.location)}"
        return facts["description"]

    def problem(self, kernel: Kernel) -> str | None:
        """Why `kernel` may take part in no multi-output fusion, or None (a merge of kernels
        that took part may: a loop or input fusion of at least two results, none in place)."""
        facts = kernel.facts
        if "problem" not in facts:
            facts["problem"] = kernel_problem(kernel.op, self.limits) if kernel.op is not None else None
        return facts["problem"]

    def hero(self, kernel: Kernel) -> Hero:
        facts = kernel.facts
        if "hero" not in facts:
            roots = list(zip(self.graph.root_ops(kernel), [value.type for value in kernel.results]))
            facts["hero"] = hero_of(roots, kernel.ops)
        return facts["hero"]

    @staticmethod
    def op_count(kernel: Kernel) -> int:
        return len(kernel.ops)

    def refuse(self, rule: str, first: Kernel, second: Kernel, reason: str) -> None:
        if self.log is None:
            return
        key = (rule, self.description(first), self.description(second), reason)
        if key not in self.logged:
            self.logged.add(key)
            self.log.append(MofDecision("refused", *key))

    def run(self) -> bool:
        changed = False
        while (self.sibling and self.sibling_step()) or (self.producer_consumer and self.producer_consumer_step()):
            changed = True
        if changed:
            self.graph.build()
        return changed

    # sibling fusion

    def sibling_step(self) -> bool:
        for value in self.graph.scanned_values():
            if value in self.settled_values:
                continue
            group = self.sibling_group(value)
            if group is None:
                self.settled_values.add(value)
                continue
            self.merge_siblings(group)
            return True
        return False

    def sibling_group(self, value: Value) -> list[Kernel] | None:
        """The first group of kernels reading `value` that may become one fusion, or None."""
        graph = self.graph
        users = []
        for _, _, user in value.uses(graph):
            if user is not None and user not in users and not user.terminator:
                users.append(user)
        if len(users) < 2:
            return None
        users.sort(key=graph.position.__getitem__)
        candidates = [user for user in users if self.problem(user) is None]
        if len(candidates) < 2:
            return None
        profit = shared_operand_problem(value)
        if profit:
            self.refuse_every_pair(candidates, profit)
            return None
        for i, first in enumerate(candidates):
            group = [first]
            for second in candidates[i + 1:]:
                reason = self.sibling_problem(group, second)
                if reason:
                    self.refuse("sibling", first, second, reason)
                    continue
                group.append(second)
            if len(group) > 1:
                return group
        return None

    def unsettle(self, fusion: Kernel) -> None:
        """After a merge, what it may have made mergeable again: the values `fusion` reads
        (their users changed) and exposes (their kernel did), and the kernels computing the
        values it reads (their users did). Everything else found unmergeable stays so: their
        candidates are the same kernels, and a merge only adds paths between kernels, so only
        adds reasons to refuse."""
        self.settled_values.difference_update(fusion.operands)
        self.settled_values.difference_update(fusion.results)
        self.settled_producers.difference_update(value.kernel for value in fusion.operands)

    def refuse_every_pair(self, candidates: list[Kernel], reason: str) -> None:
        """Refuse each pair of `candidates` (in block order) for sharing an unprofitable value.
        The log keeps each refusal once, by the two descriptions and the reason, so a scan that
        meets the same candidates again (every scan after each merge does) adds nothing."""
        if self.log is None:
            return
        descriptions = tuple(self.description(candidate) for candidate in candidates)
        if (descriptions, reason) in self.unprofitable:
            return
        self.unprofitable.add((descriptions, reason))
        for i, first in enumerate(descriptions):
            for second in descriptions[i + 1:]:
                key = ("sibling", first, second, reason)
                if key not in self.logged:
                    self.logged.add(key)
                    self.log.append(MofDecision("refused", *key))

    def sibling_problem(self, group: list[Kernel], second: Kernel) -> str | None:
        """Why `second` may not join the siblings `group` (each before it in the block)."""
        if any(self.graph.reaches(member, second) for member in group):
            return "there is a path between them: the fusion would create a cycle"
        for member in group:
            reason = shape_problem(self.hero(member), self.hero(second))
            if reason:
                return reason
        members = group + [second]
        ops = sum(self.op_count(member) for member in members)
        return size_problem(members, ops, sum(len(member.results) for member in members), self.limits)

    def merge_siblings(self, group: list[Kernel]) -> None:
        """One fusion of every sibling in `group` (pairwise without a path between them, so
        the merge creates no cycle): a value read by many kernels (a stacked weight sliced
        per layer) becomes one fusion in one scan, not one merge and rescan per kernel."""
        exposed = [result for member in group for result in member.results]
        fusion = self.merged(group, exposed)
        self.sibling_fusions.add(fusion)
        if self.log is None:
            return
        texts = [self.description(member) for member in group]
        fusion_text = self.description(fusion)
        for text in texts[1:]:
            self.log.append(MofDecision("fused", "sibling", texts[0], text, fusion=fusion_text))

    def merged(self, members: list[Kernel], exposed: list) -> Kernel:
        fusion = self.graph.merge(members, exposed, self.namer)
        self.unsettle(fusion)
        return fusion

    # producer-consumer fusion

    def producer_consumer_step(self) -> bool:
        for producer in list(self.graph.order):
            if producer in self.settled_producers:
                continue
            if self.fused_with_a_consumer(producer):
                return True
            self.settled_producers.add(producer)
        return False

    def fused_with_a_consumer(self, producer: Kernel) -> bool:
        """Fuse `producer` into its sibling fusion, or keep it as extra outputs of the first of
        its consumers that may take it; True when one merge was made."""
        graph = self.graph
        users = graph.users(producer)
        if len(users) == 1 and users[0] in self.sibling_fusions and not self.problem(producer):
            return self.fuse_into_siblings(producer, users[0])
        if len(users) < 2 or self.problem(producer):
            return False
        if graph.kind(producer) in ("broadcast", "iota", "reshape", "transpose", "slice", "convert"):
            return False  # cheap: priority fusion duplicates these instead
        for consumer in users:
            if consumer.terminator:
                continue
            reduces = "reduce" in consumer.body.kinds
            if reduces and len(producer.results) != 1:
                continue
            reason = self.problem(consumer)
            reason = f"the consumer cannot be fused ({reason})" if reason else None
            reason = reason or (self.pc_problem if reduces else self.loop_pc_problem)(producer, consumer)
            if reason:
                self.refuse("producer-consumer", producer, consumer, reason)
                continue
            exposed = list(consumer.results) + [value for value in producer.results
                                                if any(user is not consumer for _, _, user in value.uses(graph))]
            fusion = self.merged([producer, consumer], exposed)
            if self.log is not None:
                self.log.append(MofDecision("fused", "producer-consumer", self.description(producer),
                                            self.description(consumer), fusion=self.description(fusion)))
            return True
        return False

    def fuse_into_siblings(self, producer: Kernel, consumer: Kernel) -> bool:
        """Fuse `producer` into the sibling fusion `consumer`, its only user. Priority fusion
        refused it while the siblings were apart: it would have been duplicated into each,
        an expensive producer (jax's binary search: the compare of a gathered midpoint, read
        by the select of each bound; fused, one kernel a step reads and writes the bounds
        once). True when fused."""
        reason = self.problem(consumer)
        reason = f"the consumer cannot be fused ({reason})" if reason else None
        reason = reason or fusion_refusal(producer, consumer, duplicate=False, limits=self.limits, kernels=self.graph)
        reason = reason or size_problem([producer, consumer], self.op_count(producer) + self.op_count(consumer),
                                        len(consumer.results), self.limits)
        if reason:
            self.refuse("producer-consumer", producer, consumer, reason)
            return False
        fusion = self.merged([producer, consumer], list(consumer.results))
        self.sibling_fusions.add(fusion)
        if self.log is not None:
            self.log.append(MofDecision("fused", "producer-consumer", self.description(producer),
                                        self.description(consumer), fusion=self.description(fusion)))
        return True

    def loop_pc_problem(self, producer: Kernel, consumer: Kernel) -> str | None:
        """Why `producer` may not become extra outputs of the loop `consumer` (an optimizer's
        new moments, returned and read by its parameter update), or None."""
        producer_kinds = producer.body.kinds
        if "reduce" in producer_kinds:
            return "the producer holds a reduce and the consumer is a loop"
        if not set(producer_kinds + consumer.body.kinds) <= ELEMENTWISE_LOOP:
            return "the producer or the consumer is not an elementwise loop"
        loop_shape = self.hero(consumer).loop_shape
        produced = [_shape(value.type) for value in producer.results]
        if loop_shape is None or any(shape != loop_shape for shape in produced):
            return f"incompatible shapes: the producer's results {[list(p or ()) for p in produced]} are not the consumer's loop shape {list(loop_shape or ())}"
        if self.graph.reachable_indirectly(producer, consumer):
            return "fusion would create a cycle"
        ops = self.op_count(producer) + self.op_count(consumer)
        return size_problem([producer, consumer], ops, len(consumer.results) + len(producer.results), self.limits)

    def pc_problem(self, producer: Kernel, consumer: Kernel) -> str | None:
        hero = self.hero(consumer)
        produced = _shape(producer.results[0].type)
        if hero.reduction is None or produced != hero.loop_shape:
            return f"incompatible shapes: the producer's shape {list(produced or ())} is not the shape {list(hero.loop_shape or ())} the consumer reduces"
        if self.graph.reachable_indirectly(producer, consumer):
            return "fusion would create a cycle"
        reason = fusion_refusal(producer, consumer, duplicate=False, limits=self.limits, kernels=self.graph)
        if reason:
            return reason
        ops = self.op_count(producer) + self.op_count(consumer)
        return size_problem([producer, consumer], ops, len(consumer.results) + 1, self.limits)
