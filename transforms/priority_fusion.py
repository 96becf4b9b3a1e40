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

from .cost_model import CostModel, Traffic, model_for, saving
from .erasure import erase, identity, processing
from .fusion_legality import (
    NOT_KERNELS,
    Bodies,
    FusionLimits,
    fusion_refusal,
    kind_of,
    block_order,
    not_fusible_reason,
    producers_in_block,
    users_in_block,
)
from .pass_base import ModulePass, PassReport, PassResult, rendering_reports

TERMINATORS = frozenset({"func.return", "xhlo.return"})


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
        location = op.location
        key = location.attr
        text = self.locations.get(key)
        if text is None:
            text = self.locations[key] = text_of_location(location)
        return describe(op, text)


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


def fusion_base_name(body: list[ir.Operation], root: str) -> str:
    """`<first-op>_<root>_fusion`: the first op of `body` that is no constant (only as far
    into the body as that op: a fusion that keeps taking producers grows by each merge)."""
    first = next((kind for kind in map(kind_of, body) if kind not in ("constant", "parameter")), kind_of(body[0]) if body else root)
    return f"{first}_{root}_fusion"


def build_fusion(members: list[ir.Operation], exposed: list[ir.Value], namer: Namer, kind: str | None = None) -> ir.Operation:
    """Replace `members` (ops or fusions of one block, in block order) by one xhlo.fusion whose
    results are `exposed`; members whose results are still used elsewhere stay (duplicated).
    The fusion sits where the last member was; users that came earlier move after it."""
    members = [m.operation for m in members]
    inside = set(members)
    anchor = members[-1]
    inputs: list[ir.Value] = []
    taken: set = set()  # the inputs, for membership without a comparison per input
    for member in members:
        for value in member.operands:
            if value in taken or defining_op(value) in inside:
                continue
            taken.add(value)
            inputs.append(value)
    location = anchor.location
    with location, ir.InsertionPoint(anchor):
        fusion = create_op("xhlo.fusion", inputs, [v.type for v in exposed], {}, location, region_count=1)
    body = ir.Block.create_at_start(fusion.regions[0], [v.type for v in inputs], [location] * len(inputs))
    mapping: dict = {value: argument for value, argument in zip(inputs, body.arguments)}
    body_ops: list[ir.Operation] = []
    exposed_set = set(exposed)
    with ir.InsertionPoint(body) as end:
        for member in members:
            if member.name == "xhlo.fusion":
                inner_block = member.regions[0].blocks[0]
                for argument, operand in zip(inner_block.arguments, member.operands):
                    mapping[argument] = mapping[operand]
                inner_ops = list(inner_block.operations)
                # a member that loses all its uses to the fusion (each result exposed or read
                # by members only) is erased below: its body moves over whole instead of being
                # copied op by op (a consumer that keeps taking producers was copied once per
                # merge, and so was a producer fusion that has no other users)
                if all(_dies_with(result, exposed_set, inside) for result in member.results):
                    for argument in inner_block.arguments:
                        argument.replace_all_uses_with(mapping[argument])
                    for inner in inner_ops[:-1]:
                        inner.operation.detach_from_parent()
                        end.insert(inner.operation)
                        body_ops.append(inner.operation)
                        for result in inner.operation.results:
                            mapping[result] = result
                else:
                    for inner in inner_ops[:-1]:
                        body_ops.append(_clone_into(inner.operation, mapping))
                for result, value in zip(member.results, inner_ops[-1].operands):
                    mapping[result] = mapping[value]
            else:
                body_ops.append(_clone_into(member, mapping))
        create_op("xhlo.return", [mapping[v] for v in exposed], [], {}, location)
    roots = [kind_of(defining_op(mapping[v])) if defining_op(mapping[v]) is not None else "parameter" for v in exposed]
    if kind is None:
        kind = "input" if "reduce" in roots else "loop"
    fusion.attributes["kind"] = ir.StringAttr.get(kind)
    fusion.attributes["name"] = ir.StringAttr.get(namer.unique(fusion_base_name(body_ops, roots[0])))
    # the users of the last member's results all stand after it, hence after the fusion
    users_may_precede = any(defining_op(value) != anchor for value in exposed)
    for index, value in enumerate(exposed):
        value.replace_all_uses_with(fusion.results[index])
    for member in reversed(members):
        if all(not list(r.uses) for r in member.results):
            erase(member)
    if users_may_precede:
        _move_users_after(fusion)
    return fusion


def _dies_with(result: ir.Value, exposed: set, members: set) -> bool:
    """Whether `result` of a member of a fusion being built has no use left once it is built:
    it is exposed (its uses go to the fusion's results), or only members read it."""
    return result in exposed or all(use.owner.operation in members for use in result.uses)


def _clone_into(op: ir.Operation, mapping: dict) -> ir.Operation:
    clone = op.clone()
    for index, value in enumerate(op.operands):
        if value in mapping:
            clone.operands[index] = mapping[value]
    for result, new in zip(op.results, clone.results):
        mapping[result] = new
    return clone


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
        descriptions, bodies = Descriptions(), Bodies()
        changed = False
        with module.context, ir.Location.unknown():
            for block in fusible_blocks(module):
                changed = FuseBlock(block, model, limits, namer, decisions, descriptions, bodies).run() or changed
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


class KernelTimes:
    """The cost model's kernel times for one block, each computed once: an op's time alone, and
    a producer fused into a consumer. Both depend only on the two ops (their bodies, operand
    and result types), which never change while they live: a merge makes a new op and erases
    the old ones, and only redirects its users' operands to values of the same types. So a
    time is kept until `forget` is told one of its ops is about to be erased (ops are keyed by
    address, which an op created later may reuse). A priority then costs additions, not
    kernel costs: a producer with many consumers (a constant every layer reads) is no longer
    recosted in full each time one of its consumers is merged (XLA's PriorityFusion caches
    its priorities the same way and recomputes only the merged kernel's neighbours). Each
    op's flops are kept the same way, for the pairs it takes part in, and so is what it reads
    and writes (`Traffic`, which every pair it is in walked its operands for), until a merge
    redirects its operands (`redirected`)."""

    def __init__(self, model: CostModel):
        self.model = model
        self.alone: dict[int, float] = {}
        self.fused: dict[tuple[int, int], float] = {}
        self.pairs_of: dict[int, set[tuple[int, int]]] = {}
        self.flops: dict[int, float] = {}
        self.traffics: dict[int, Traffic] = {}

    def traffic(self, op: ir.Operation, key: int) -> Traffic:
        traffic = self.traffics.get(key)
        if traffic is None:
            traffic = self.traffics[key] = self.model.traffic(op)
        return traffic

    def op_flops(self, op: ir.Operation, key: int) -> float:
        flops = self.flops.get(key)
        if flops is None:
            flops = self.flops[key] = self.model.op_flops(op)
        return flops

    def op_time(self, op: ir.Operation, key: int | None = None) -> float:
        key = identity(op) if key is None else key
        time = self.alone.get(key)
        if time is None:
            if kind_of(op) in NOT_KERNELS:
                time = 0.0
            else:
                traffic = self.traffic(op, key)
                time = self.model.traffic_time([traffic], (key,), traffic.written, self.op_flops(op, key))
            self.alone[key] = time
        return time

    def fused_time(self, producer: ir.Operation, consumer: ir.Operation, key: tuple[int, int] | None = None) -> float:
        key = (identity(producer), identity(consumer)) if key is None else key
        time = self.fused.get(key)
        if time is None:
            flops = sum((self.op_flops(producer, key[0]), self.op_flops(consumer, key[1])))
            consumer_traffic = self.traffic(consumer, key[1])
            time = self.fused[key] = self.model.traffic_time([self.traffic(producer, key[0]), consumer_traffic], key,
                                                             consumer_traffic.written, flops)
            self.pairs_of.setdefault(key[0], set()).add(key)
            self.pairs_of.setdefault(key[1], set()).add(key)
        return time

    def time_saved(self, producer: ir.Operation, consumers: list[ir.Operation], producer_stays: bool) -> tuple[float, float, float]:
        # each op's address read once (a producer shared by every layer has many consumers)
        producer_key, consumer_keys = identity(producer), [identity(c) for c in consumers]
        return saving(self.op_time(producer, producer_key), [self.op_time(c, k) for c, k in zip(consumers, consumer_keys)],
                      [self.fused_time(producer, c, (producer_key, k)) for c, k in zip(consumers, consumer_keys)], producer_stays)

    def merged_flops(self, fusion: ir.Operation, producer_flops: float, consumer_flops: float) -> None:
        """The flops of `fusion`, just made of a producer and a consumer of these flops: their
        sum (what `fused_time` costed the pair with), instead of a walk over its body, which
        grows by every merge into it. Taken when both are whole numbers whose sum a float holds
        exactly (loop and input fusions hold no dot or convolution, the only ops of fractional
        flops): then the body's sum in any order is that very number."""
        total = producer_flops + consumer_flops
        if producer_flops.is_integer() and consumer_flops.is_integer() and total < 2.0**53:
            self.flops[identity(fusion)] = total

    def merged_traffic(self, fusion: ir.Operation, producer_key: int, producer: Traffic, consumer: Traffic) -> None:
        """What `fusion`, just made of a producer (at `producer_key`) and a consumer whose
        results it computes, reads and writes: what the two read, but for the producer's
        results (its operands are theirs), once each; what the consumer wrote."""
        reads, seen = [], set()
        for value, owner, size in producer.reads + consumer.reads:
            if owner != producer_key and value not in seen:
                seen.add(value)
                reads.append((value, owner, size))
        self.traffics[identity(fusion)] = Traffic(tuple(reads), consumer.written)

    def redirected(self, op: ir.Operation) -> None:
        """`op`'s operands were redirected to a new fusion's results: what it reads changed."""
        self.traffics.pop(identity(op), None)

    def forget(self, address: int) -> None:
        self.alone.pop(address, None)
        self.flops.pop(address, None)
        self.traffics.pop(address, None)
        for pair in self.pairs_of.pop(address, ()):
            self.fused.pop(pair, None)


class FuseBlock:
    """The priority queue over one block's producers.

    Heap entries are (-priority, sequence, hash): an op's hash (`hash(op)`, which MLIR takes
    over the op's structure: a merge that redirects its operands changes it) at the time it
    was pushed. An entry is live while `current[hash] == sequence` (lazy invalidation); a live
    entry is the first op in block order that still has that hash (none: the entry is
    dropped). The ops pushed under each hash are kept (`pushed`, by address, so that each is
    found without a walk over the block and an op about to be erased is dropped before its
    handle dangles). `log` takes the decisions; None: nobody reads them, none is described."""

    def __init__(self, block, model, limits, namer, log, descriptions=None, bodies=None):
        self.block, self.limits, self.namer, self.log = block, limits, namer, log
        self.describe = descriptions or Descriptions()
        self.bodies = bodies or Bodies()
        self.times = KernelTimes(model)
        self.current: dict[int, int] = {}
        self.pushed: dict[int, dict[int, ir.Operation]] = {}
        self.pushed_hash: dict[int, int] = {}
        self.heap: list = []
        self.counter = itertools.count()

    def forget(self, op: ir.Operation) -> None:
        """Drop `op`, which a merge is about to erase: its queue entry and kernel times."""
        self.current.pop(hash(op), None)
        address = identity(op)
        if address in self.pushed_hash:
            del self.pushed[self.pushed_hash.pop(address)][address]
        self.times.forget(address)

    def push(self, op: ir.Operation) -> None:
        op = op.operation
        if op.name in TERMINATORS or op.block != self.block:
            return
        sequence = next(self.counter)
        key, address = hash(op), identity(op)
        self.current[key] = sequence
        if address in self.pushed_hash:
            del self.pushed[self.pushed_hash[address]][address]
        self.pushed_hash[address] = key
        self.pushed.setdefault(key, {})[address] = op
        heapq.heappush(self.heap, (-self.priority(op), sequence, key))

    def find(self, key: int) -> ir.Operation | None:
        """The first op in block order among those pushed under `key` that still hash to it."""
        found = [op for op in self.pushed.get(key, {}).values() if hash(op) == key]
        return min(found, key=functools.cmp_to_key(block_order)) if found else None

    def priority(self, op: ir.Operation) -> float:
        if kind_of(op) == "constant":
            # XLA's PriorityFusion: constants fuse last, into every consumer; recosting one
            # shared by every layer after each merge near it made the queue quadratic
            return float("-inf")
        users = users_in_block(op)
        consumers = [c for c in users if c.name not in TERMINATORS]
        if not consumers or not_fusible_reason(op, self.limits):
            return float("-inf")
        stays = len(consumers) != len(users)
        return self.times.time_saved(op, consumers, stays)[0]

    def run(self) -> bool:
        for op in list(self.block.operations):
            self.push(op)
        changed = False
        while self.heap:
            _, sequence, key = heapq.heappop(self.heap)
            if self.current.get(key) != sequence:
                continue  # stale: the op changed or was erased since it was pushed
            del self.current[key]
            op = self.find(key)
            if op is None:
                continue
            processing(op)
            changed = self.fuse_producer(op) or changed
        return changed

    def refused(self, producer: ir.Operation, consumer: ir.Operation, reason: str, **costs) -> None:
        if self.log is not None:
            self.log.append(Decision("refused", self.describe(producer), self.describe(consumer), reason, **costs))

    def fuse_producer(self, producer: ir.Operation) -> bool:
        users = users_in_block(producer)
        consumers = [u for u in users if u.name not in TERMINATORS]
        if not users:
            return False
        if not consumers:
            return False  # only returned: nothing to fuse into
        duplicate = len(users) > 1
        accepted = []
        for consumer in consumers:
            reason = fusion_refusal(producer, consumer, duplicate=duplicate, limits=self.limits, bodies=self.bodies)
            if reason:
                self.refused(producer, consumer, reason)
            else:
                accepted.append(consumer)
        if not accepted:
            return False
        stays = len(accepted) != len(users)
        saved, unfused, fused = self.times.time_saved(producer, accepted, stays)
        costs = dict(saved_us=saved * 1e6, unfused_us=unfused * 1e6, fused_us=fused * 1e6)
        if saved < 0 or (saved == 0 and kind_of(producer) != "constant"):
            for consumer in accepted:
                self.refused(producer, consumer, "the fusion is not profitable", **costs)
            return False
        logging = self.log is not None
        producer_text = self.describe(producer) if logging else ""
        producer_key = identity(producer)
        producer_flops, producer_body = self.times.op_flops(producer, producer_key), self.bodies.of(producer)
        producer_traffic = self.times.traffic(producer, producer_key)
        if not stays:
            self.forget(producer)  # the last merge erases it
        made = []
        for consumer in accepted:
            consumer_text = self.describe(consumer) if logging else ""
            consumer_key = identity(consumer)
            consumer_flops, consumer_body = self.times.op_flops(consumer, consumer_key), self.bodies.of(consumer)
            consumer_traffic = self.times.traffic(consumer, consumer_key)
            self.forget(consumer)  # before the merge erases it
            fusion = build_fusion([producer, consumer], list(consumer.results), self.namer)
            self.times.merged_flops(fusion, producer_flops, consumer_flops)
            self.times.merged_traffic(fusion, producer_key, producer_traffic, consumer_traffic)
            self.bodies.merged(fusion, producer_body, consumer_body)
            for user in users_in_block(fusion):
                self.times.redirected(user)  # it read the consumer's results
            if logging:
                self.log.append(Decision("fused", producer_text, consumer_text, fusion=self.describe(fusion), **costs))
            made.append(fusion)
        neighbours = []
        for fusion in made:
            neighbours.append(fusion)
            neighbours.extend(producers_in_block(fusion))
        if stays:
            neighbours.append(producer)  # it keeps other users, so it was not erased
        seen = set()
        for op in neighbours:
            if op not in seen:
                seen.add(op)
                self.push(op)
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
