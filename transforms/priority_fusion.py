"""xhlo-priority-fusion: fuse producers into their consumers, most profitable first (XLA's
PriorityFusion, with the legality rules of InstructionFusion and a per-backend cost model).

In every computation (function bodies and while bodies; reducer regions are not fused), each
op is a candidate producer; its priority is the time fusing it into its consumers saves
(`cost_model.py`, option `backend=cpu|gpu`). Producers leave a heap in priority order (lazy
invalidation: an entry whose version is stale is dropped); a popped producer is fused into
every consumer that accepts it (`fusion_legality.py`). A consumer that is no fusion yet becomes
one: kind `input` when its root is a reduce, else `loop`. When the producer has users left it
is duplicated into the fused consumers, which is allowed only for cheap producers. After a
merge the new fusion and the producers of its operands get new priorities. Dots and
convolutions stay library calls (no output fusion).

Each fusion gets a `name` attribute `<first-op>_<root-op>_fusion`, made unique with `.N`.
Every merge and every refusal is logged with its reason and cost numbers; the pass returns
the log as its report (`FusionDecisions`, dumped as `fusion-decisions.txt`), and
`explain(log, query)` answers "why was this (not) fused" from its records or its text. A run
whose reports nobody reads (`rendering_reports()`: a compile that does not dump) keeps no log:
describing both ops of every decision was a tenth of the pass, and the decisions are the same.
Changed: any fusion made.
"""

import functools
import heapq
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla import errors
from mlirxla.ir_queries import defining_op
from mlirxla.mlir import ir
from mlirxla.young_garbage import collection_paused

from .cost_model import model_for
from .erasure import erase, processing
from .fusion_graph import TERMINATORS, FusionGraph, Node, clone_into, fusion_base_name
from .fusion_legality import FusionLimits, block_order, fusion_refusal, kind_of, users_in_block
from .pass_base import ModulePass, PassReport, PassResult, rendering_reports

@dataclass
class Decision:
    """One fusion decision: `fused` or `refused`, with the ops, the reason and the costs."""

    verdict: str  # "fused" | "refused"
    producer: str  # the producer's description: name and location
    consumer: str
    reason: str = ""
    fusion: str = ""  # the name of the fusion made
    saved_us: float | None = None
    unfused_us: float | None = None
    fused_us: float | None = None

    def line(self) -> str:
        costs = ""
        if self.saved_us is not None:
            costs = f" [time saved {self.saved_us:.3f}us: unfused {self.unfused_us:.3f}us, fused {self.fused_us:.3f}us]"
        if self.verdict == "fused":
            return f"fused {self.producer} into {self.consumer} -> {self.fusion}{costs}"
        return f"not fused {self.producer} into {self.consumer}: {self.reason}{costs}"


# --- describing ops --------------------------------------------------------------------------


def location_text(op: ir.Operation) -> str:
    """`file:line:col` of the op (`-` for text parsed from memory), else the raw location."""
    return text_of_location(op.location)


def text_of_location(location: ir.Location) -> str:
    text = errors.location_text(location)
    return str(location) if text == "-" else text


def op_name(op: ir.Operation) -> str:
    if "name" in op.attributes:
        return ir.StringAttr(op.attributes["name"]).value
    return kind_of(op)


def describe(op: ir.Operation, location: str | None = None) -> str:
    """`name(kind) at file:line:col`; `location` is the op's location text when known."""
    where = location_text(op) if location is None else location
    return f"{op_name(op)}({kind_of(op) if op.name == 'xhlo.fusion' else 'op'}) at {where}"


class Descriptions:
    """`describe` for one pass run, printing each location once: a location is an attribute,
    uniqued in the module's context, so its text never changes while the pass runs (a fusion
    pass describes an op for every decision it logs, and printing and matching the location
    was a tenth of priority fusion's time)."""

    def __init__(self):
        self.locations: dict[ir.Attribute, str] = {}

    def __call__(self, op: ir.Operation) -> str:
        return describe(op, self.place(op.location))

    def place(self, location: ir.Location) -> str:
        key = location.attr
        text = self.locations.get(key)
        if text is None:
            text = self.locations[key] = text_of_location(location)
        return text


# --- building fusions ------------------------------------------------------------------------


class Namer:
    """Unique fusion names in one module: `base`, `base.1`, `base.2`, ..."""

    def __init__(self, module: ir.Module):
        self.used: set[str] = set()
        # base -> the counter to try first: every smaller one is taken (names are never freed)
        self.next_counter: dict[str, int] = {}

        def visit(op):
            if "name" in op.attributes and op.name == "xhlo.fusion":
                self.used.add(ir.StringAttr(op.attributes["name"]).value)
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)

    def unique(self, base: str) -> str:
        counter = self.next_counter.get(base, 0)
        name = base if counter == 0 else f"{base}.{counter}"
        while name in self.used:
            counter += 1
            name = f"{base}.{counter}"
        self.used.add(name)
        self.next_counter[base] = counter + 1
        return name


def build_fusion(members: list[ir.Operation], exposed: list[ir.Value], namer: Namer, kind: str | None = None) -> ir.Operation:
    """Replace `members` (ops or fusions of one block, in block order) by one xhlo.fusion whose
    results are `exposed`; members whose results are still used elsewhere stay (duplicated).
    The fusion sits where the last member was; users that came earlier move after it.

    A member that loses all its uses to the fusion (each result exposed or read by members
    only) is erased: a fusion's body then moves over whole instead of being copied op by op
    (a consumer that keeps taking producers was copied once per merge). The last member's
    block itself becomes the fusion's body when it dies so: the other members' ops go in
    before its own, its arguments give way to the fusion's (added after them, then the old
    ones erased: the same arguments in the same order as a new block's), and its ops stay
    where they are instead of moving one by one."""
    members = [m.operation for m in members]
    inside = set(members)
    anchor = members[-1]
    inputs: list[ir.Value] = []
    # the members' results and the inputs, for membership by value (an operand's defining op
    # is a new handle per operand)
    taken: set = {result for member in members for result in member.results}
    for member in members:
        for value in member.operands:
            if value in taken:
                continue
            taken.add(value)
            inputs.append(value)
    location = anchor.location
    with location, ir.InsertionPoint(anchor):
        fusion = create_op("xhlo.fusion", inputs, [v.type for v in exposed], {}, location, region_count=1)
    exposed_set = set(exposed)
    kept = None
    if anchor.name == "xhlo.fusion" and all(_dies_with(result, exposed_set, inside) for result in anchor.results):
        kept = anchor.regions[0].blocks[0]
        kept_ops = [op.operation for op in kept.operations]
        kept_arguments = len(kept.arguments)
        kept.append_to(fusion.regions[0])
        body = kept
        mapping: dict = {value: body.add_argument(value.type, location) for value in inputs}
        members = members[:-1]
        point = ir.InsertionPoint(kept_ops[0])
    else:
        body = ir.Block.create_at_start(fusion.regions[0], [v.type for v in inputs], [location] * len(inputs))
        mapping = {value: argument for value, argument in zip(inputs, body.arguments)}
        point = ir.InsertionPoint(body)
    body_ops: list[ir.Operation] = []
    with point:
        for member in members:
            if member.name == "xhlo.fusion":
                inner_block = member.regions[0].blocks[0]
                for argument, operand in zip(inner_block.arguments, member.operands):
                    mapping[argument] = mapping[operand]
                inner_ops = list(inner_block.operations)
                if all(_dies_with(result, exposed_set, inside) for result in member.results):
                    for argument in inner_block.arguments:
                        argument.replace_all_uses_with(mapping[argument])
                    for inner in inner_ops[:-1]:
                        inner.operation.detach_from_parent()
                        point.insert(inner.operation)
                        body_ops.append(inner.operation)
                        for result in inner.operation.results:
                            mapping[result] = result
                else:
                    for inner in inner_ops[:-1]:
                        body_ops.append(clone_into(inner.operation, mapping))
                for result, value in zip(member.results, inner_ops[-1].operands):
                    mapping[result] = mapping[value]
            else:
                body_ops.append(clone_into(member, mapping))
    if kept is not None:
        for argument, operand in zip(list(kept.arguments)[:kept_arguments], anchor.operands):
            argument.replace_all_uses_with(mapping[operand])
        for _ in range(kept_arguments):
            kept.erase_argument(0)
        old_return = kept_ops[-1]
        for result, value in zip(anchor.results, old_return.operands):
            mapping[result] = value
        body_ops.extend(kept_ops[:-1])
    with ir.InsertionPoint(body if kept is None else old_return):
        create_op("xhlo.return", [mapping[v] for v in exposed], [], {}, location)
    if kept is not None:
        erase(old_return)
    roots = [kind_of(root) if (root := defining_op(mapping[v])) is not None else "parameter" for v in exposed]
    if kind is None:
        kind = "input" if "reduce" in roots else "loop"
    fusion.attributes["kind"] = ir.StringAttr.get(kind)
    fusion.attributes["name"] = ir.StringAttr.get(namer.unique(fusion_base_name((kind_of(op) for op in body_ops), roots[0])))
    # the users of the last member's results all stand after it, hence after the fusion
    anchor_results = set(anchor.results)
    users_may_precede = any(value not in anchor_results for value in exposed)
    for index, value in enumerate(exposed):
        value.replace_all_uses_with(fusion.results[index])
    for member in reversed(members if kept is None else members + [anchor]):
        if all(not list(r.uses) for r in member.results):
            erase(member)
    if users_may_precede:
        _move_users_after(fusion)
    return fusion


def _dies_with(result: ir.Value, exposed: set, members: set) -> bool:
    """Whether `result` of a member of a fusion being built has no use left once it is built:
    it is exposed (its uses go to the fusion's results), or only members read it."""
    return result in exposed or all(use.owner.operation in members for use in result.uses)


def _move_users_after(fusion: ir.Operation) -> None:
    """Ops before `fusion` that (transitively) use its results move after it, in order."""
    late: set = set()
    frontier = users_in_block(fusion)
    while frontier:
        op = frontier.pop()
        if op not in late and op.is_before_in_block(fusion):
            late.add(op)
            frontier.extend(users_in_block(op))
    anchor = fusion
    for op in sorted(late, key=functools.cmp_to_key(block_order)):
        op.move_after(anchor)
        anchor = op


def fusible_blocks(module: ir.Module) -> list[ir.Block]:
    """Blocks of the computations fusion runs in: function bodies and while / conditional
    bodies, not reducers, comparators or fused computations."""
    blocks: list[ir.Block] = []

    def visit(op):
        name = op.operation.name
        if name == "func.func" or name in ("xhlo.while", "xhlo.conditional"):
            for region in op.regions:
                for block in region.blocks:
                    blocks.append(block)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return blocks


# --- the pass --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PriorityFusionPass(ModulePass):
    """Fuses producers into consumers in order of the time the fusion saves."""

    name: ClassVar[str] = "xhlo-priority-fusion"
    summary: ClassVar[str] = "priority fusion: producers into consumers, most time saved first (loop and input fusions)"
    backend: str = "cpu"

    def run(self, module: ir.Module) -> PassResult:
        decisions: list[Decision] | None = [] if rendering_reports() else None
        model = model_for(self.backend).remembering()
        limits = FusionLimits()
        namer = Namer(module)
        descriptions = Descriptions()
        changed = False
        with module.context, ir.Location.unknown(), collection_paused():
            for block in fusible_blocks(module):
                changed = FuseBlock(block, model, limits, namer, decisions, descriptions).run() or changed
        if decisions is None:
            return PassResult(changed)
        return PassResult(changed, FusionDecisions("fusion-decisions.txt", tuple(decisions)))


@dataclass(frozen=True)
class FusionDecisions(PassReport):
    """The decisions of one run of a fusion pass (priority, output or batch-slice fusion), dumped
    as `file`; `mlirxla-opt --explain-fusion` answers from them."""

    file: str
    decisions: tuple[Decision, ...]

    def dump_files(self) -> dict[str, str]:
        return {self.file: decision_text(self.decisions)}


def decision_text(log: Sequence[Decision]) -> str:
    header = f"# fusion decisions: {sum(d.verdict == 'fused' for d in log)} fused, {sum(d.verdict == 'refused' for d in log)} refused\n"
    return header + "".join(d.line() + "\n" for d in log)


class FuseBlock:
    """The priority queue over one block's producers, deciding on the block's `FusionGraph`
    and building the fusions it decided at the end.

    Heap entries are (-priority, sequence, (node, version)). An entry is live while
    `current[key] == sequence` (lazy invalidation: pushing the node again supersedes it) and
    its node is alive with the version it was pushed with: MLIR's `hash(op)`, which the queue
    keyed entries by when it ran on MLIR ops, covers an op's operands, so a node whose operands
    a merge redirected is skipped until it is pushed again. `log` takes the decisions; None:
    nobody reads them, none is described."""

    def __init__(self, block, model, limits, namer, log, descriptions=None):
        self.block, self.limits, self.namer, self.log = block, limits, namer, log
        self.graph = FusionGraph(block, model, descriptions or Descriptions())
        self.current: dict[tuple, int] = {}
        self.heap: list = []
        self.counter = itertools.count()

    def push(self, node: Node) -> None:
        if node.terminator:
            return
        sequence = next(self.counter)
        key = (node, node.version)
        self.current[key] = sequence
        heapq.heappush(self.heap, (-self.priority(node), sequence, key))

    def priority(self, node: Node) -> float:
        if node.kind == "constant":
            # XLA's PriorityFusion: constants fuse last, into every consumer; recosting one
            # shared by every layer after each merge near it made the queue quadratic
            return float("-inf")
        users = self.graph.users_in_order(node)
        consumers = [c for c in users if not c.terminator]
        if not consumers or self.graph.not_fusible(node, self.limits):
            return float("-inf")
        stays = len(consumers) != len(users)
        return self.graph.time_saved(node, consumers, stays)[0]

    def run(self) -> bool:
        for node in self.graph.nodes:
            self.push(node)
        changed = False
        while self.heap:
            _, sequence, key = heapq.heappop(self.heap)
            if self.current.get(key) != sequence:
                continue  # stale: the node was pushed again since
            del self.current[key]
            node, version = key
            if not node.alive or node.version != version:
                continue  # merged away, or its operands changed since it was pushed
            processing(node.anchor)
            changed = self.fuse_producer(node) or changed
        if changed:
            self.graph.build()
        return changed

    def refused(self, producer: Node, consumer: Node, reason: str, **costs) -> None:
        if self.log is not None:
            describe = self.graph.description
            self.log.append(Decision("refused", describe(producer), describe(consumer), reason, **costs))

    def fuse_producer(self, producer: Node) -> bool:
        graph = self.graph
        users = graph.users_in_order(producer)
        consumers = [u for u in users if not u.terminator]
        if not consumers:
            return False  # unused, or only returned: nothing to fuse into
        duplicate = len(users) > 1
        accepted = []
        for consumer in consumers:
            reason = fusion_refusal(producer, consumer, duplicate=duplicate, limits=self.limits, kernels=graph)
            if reason:
                self.refused(producer, consumer, reason)
            else:
                accepted.append(consumer)
        if not accepted:
            return False
        stays = len(accepted) != len(users)
        saved, unfused, fused = graph.time_saved(producer, accepted, stays)
        costs = dict(saved_us=saved * 1e6, unfused_us=unfused * 1e6, fused_us=fused * 1e6)
        if saved < 0 or (saved == 0 and producer.kind != "constant"):
            for consumer in accepted:
                self.refused(producer, consumer, "the fusion is not profitable", **costs)
            return False
        logging = self.log is not None
        producer_text = graph.description(producer) if logging else ""
        made = []
        for index, consumer in enumerate(accepted):
            consumer_text = graph.description(consumer) if logging else ""
            fusion = graph.merge(producer, consumer, not stays and index == len(accepted) - 1, self.namer)
            if logging:
                self.log.append(Decision("fused", producer_text, consumer_text, fusion=graph.description(fusion), **costs))
            made.append(fusion)
        neighbours = []
        for fusion in made:
            neighbours.append(fusion)
            neighbours.extend(graph.producers(fusion))
        if stays:
            neighbours.append(producer)  # it keeps other users, so it was not merged away
        seen = set()
        for node in neighbours:
            if node not in seen:
                seen.add(node)
                self.push(node)
        return True

# --- explaining decisions --------------------------------------------------------------------

LINE = re.compile(r"^(fused|not fused) (.+?) into (.+?)(?: -> (.+?)|: (.+?))(?: \[(.*)\])?$")


def parse_log(text: str) -> list[Decision]:
    decisions = []
    for raw in text.splitlines():
        match = LINE.match(raw.strip())
        if not match:
            continue
        verdict, producer, consumer, fusion, reason, _ = match.groups()
        decision = Decision("fused" if verdict == "fused" else "refused", producer, consumer, reason or "", fusion or "")
        decision.costs_text = match.group(6)
        decisions.append(decision)
    return decisions


def explain(log, query: str) -> str:
    """Answer "why was `query` (an op name, fusion name or location) fused or not" from a
    decision log (its text, or the `Decision` records)."""
    records = parse_log(log) if isinstance(log, str) else list(log)
    hits = [d for d in records if query in d.producer or query in d.consumer or query in d.fusion]
    if not hits:
        return f"no fusion decision mentions '{query}': it was never a candidate (not in a fused computation, or only returned)"
    lines = [f"fusion decisions about '{query}':"]
    for decision in hits:
        lines.append("  " + decision.line())
    fused = [d for d in hits if d.verdict == "fused"]
    if fused:
        lines.append(f"'{query}' was fused ({len(fused)} merge(s)); last into {fused[-1].fusion}")
    else:
        reasons = sorted({d.reason for d in hits})
        lines.append(f"'{query}' was not fused: " + "; ".join(reasons))
    return "\n".join(lines)
