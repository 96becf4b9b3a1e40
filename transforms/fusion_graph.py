"""The block priority fusion decides on, as plain Python objects, and the fusions it decided,
built in MLIR once at the end.

Priority fusion merges a producer into a consumer hundreds of times a program (687 merges on
the Adam update), and a merge made in MLIR built a fusion op, moved or cloned two bodies and
redirected uses, after which every question (users, costs, legality, the queue's keys) went
through the bindings again: about 100 us a merge, most of the pass. Here a block is read once
into `Node`s (an op of the block, or the merge of two nodes) and `Value`s (what nodes read and
define); merges are decided on them, and only the fusions left at the end are built
(`FusionGraph.build`), each once: its body the producer's ops and then the consumer's, each
part in a scope of its own as a fusion body is, its operands, name, kind and place in the block
those the merges made one at a time in MLIR would have left.

What the graph keeps of the MLIR block, because decisions depend on it:
- order: a node stands where its op stood (`position`), a merge where its consumer stood (a
  fusion is built before its consumer, which it replaces); no merge moves another op;
- users: the ops of the block that read a node's values, directly or from inside their
  regions (then the op of the block enclosing the use);
- `version`: how often a node's operands were redirected to a merge's values. MLIR's
  `hash(op)`, which the queue keyed its entries by, covers an op's operands (and not its
  regions), so an entry pushed before its op's operands changed was skipped until the op was
  pushed again; an entry keyed by (node, version) is skipped the same way;
- each node's kernel time, flops, traffic and body, worked out as the cost model and the
  legality rules work them out from MLIR ops, a merge's read off its two parts.
"""

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.mlir import ir

from .cost_model import CostModel, Traffic, saving
from .erasure import erase, identity
from .fusion_legality import (
    NOT_KERNELS,
    Body,
    FusionLimits,
    fused_ops,
    in_place_pair,
    kind_of,
    not_fusible_reason,
)

TERMINATORS = frozenset({"func.return", "xhlo.return"})
# ops a fusion is not named after: the constants merged in last stand first in its body
LEADING_UNNAMED = frozenset({"constant", "parameter"})
# flops of whole numbers below this add up exactly in a float, in any order
EXACT_FLOPS = 2.0**53


def fusion_base_name(kinds, root: str) -> str:
    """`<first-op>_<root>_fusion`: the first of the body's op `kinds` that is no constant (read
    only as far as that op: a fusion that keeps taking producers grows by each merge)."""
    first = None
    for index, kind in enumerate(kinds):
        if kind not in LEADING_UNNAMED:
            first = kind
            break
        if index == 0:
            first = kind
    return f"{root if first is None else first}_{root}_fusion"


class Value:
    """A value nodes read: a result of a node of the block (`node`; a merge takes over its
    consumer's results), or a block argument or value from outside the block (`node` None).
    `value` is the MLIR value it stands for until the fusions are built.

    `uses` is its use list in MLIR's order, as merging one fusion at a time would have left it
    (later passes read users in that order: multi-output fusion takes the first consumer that
    accepts): (user, operand number) pairs, a user being a node or a nested MLIR op. Read
    from MLIR when a merge first changes it (None until then; `direct` are the nodes reading
    it, for telling them apart)."""

    __slots__ = ("node", "value", "type", "folds", "direct", "uses")

    def __init__(self, node, value: ir.Value, value_type: ir.Type, folds: bool):
        self.node, self.value, self.type = node, value, value_type
        self.folds = folds  # a constant of at most one element: no kernel reads it from memory
        self.direct: list = []
        self.uses: list | None = None

    def read_uses(self) -> list:
        """The use list, read from the MLIR value (untouched until the fusions are built) with
        the uses of nodes merged away since dropped, as their erasure dropped them."""
        if self.uses is None:
            readers = {identity(node.op): node for node in self.direct}
            uses = []
            for use in self.value.uses:
                owner = use.owner
                user = readers.get(identity(owner))
                if user is None:
                    uses.append((owner.operation, use.operand_number))
                elif user.alive:
                    uses.append((user, use.operand_number))
            self.uses = uses
        return self.uses


class Node:
    """An op of the block (`op`), or a merge of `producer` into `consumer` (both as they were
    when merged: a node never changes its body)."""

    __slots__ = ("op", "producer", "consumer", "kind", "terminator", "name", "fusion_kind", "anchor", "position",
                 "operands", "captured", "results", "users", "version", "alive", "roots_from", "_body", "_flops",
                 "traffic", "alone", "_description", "_refusal", "built")

    def __init__(self, op, producer, consumer, kind: str, anchor: ir.Operation, position: int):
        self.op, self.producer, self.consumer = op, producer, consumer
        self.kind, self.anchor, self.position = kind, anchor, position
        self.terminator = False
        self.name = self.fusion_kind = None
        self.operands: list[Value] = []
        self.captured: list[Value] = []  # values of the block read inside its regions
        self.results: list[Value] = []
        self.users: set = set()
        self.version = 0
        self.alive = True
        self.roots_from: tuple = ()  # per result: the kind of the op computing it, or the operand it returns
        self._body = self._flops = self.traffic = self.alone = self._description = None
        self._refusal = False  # not yet asked
        self.built: ir.Operation | None = None  # a merge's fusion, once built

    def ops(self) -> list[ir.Operation]:
        """The MLIR ops of its kernel, in the order its fusion's body holds them."""
        if self.op is not None:
            return fused_ops(self.op)
        return self.producer.ops() + self.consumer.ops()

    def in_place(self) -> Value | None:
        """The operand its kernel updates in place (a dynamic-update-slice root), or None."""
        if self.op is None:
            return self.consumer.in_place()
        pair = in_place_pair(self.op)
        return self.operands[pair[0]] if pair else None


def merged_operand_count(producer, consumer) -> int:
    """The operands of `producer` merged into `consumer` (nodes of either graph): both kernels'
    operands, less the producer's results the consumer reads."""
    values = set(producer.results)
    values.update(consumer.operands)
    values.update(producer.operands)
    return len(values) - len(producer.results)


class FusionGraph:
    """One block as nodes, the merges decided on them, the questions the legality rules
    (`fusion_legality.fusion_refusal`'s `kernels`) and the cost model ask, and `build`."""

    def __init__(self, block: ir.Block, model: CostModel, descriptions):
        self.block, self.model, self.describe_op = block, model, descriptions
        self.pairs: dict[tuple[Node, Node], float] = {}
        self.reordered: dict[Value, None] = {}  # values whose use lists merges changed
        self.nodes: list[Node] = []  # the block's ops, in order
        self.at: list[Node | None] = []  # the live node at each position
        self.read_block()

    # --- reading the block --------------------------------------------------------------------

    def read_block(self) -> None:
        values: dict[ir.Value, Value] = {}
        for position, handle in enumerate(self.block.operations):
            op = handle.operation
            name = op.name
            node = Node(op, None, None, name[5:] if name.startswith("xhlo.") else name, op, position)
            node.terminator = name in TERMINATORS
            node.operands = [values.get(value) or self.outside(value, values) for value in op.operands]
            for value in node.operands:
                value.direct.append(node)
                if value.node is not None:
                    value.node.users.add(node)
            if len(op.regions):
                self.read_captured(node, values)
            folds = name == "xhlo.constant" and self.model.sizes(op.results[0].type)[0] <= 1
            for result in op.results:
                node.results.append(value := Value(node, result, result.type, folds))
                values[result] = value
            node.roots_from = self.roots_of(node)
            self.nodes.append(node)
        self.at = list(self.nodes)

    def outside(self, value: ir.Value, values: dict) -> Value:
        """A block argument or a value defined outside the block."""
        owner = value.owner
        folds = (isinstance(owner, (ir.Operation, ir.OpView)) and owner.operation.name == "xhlo.constant"
                 and self.model.sizes(value.type)[0] <= 1)
        made = values[value] = Value(None, value, value.type, folds)
        return made

    def read_captured(self, node: Node, values: dict) -> None:
        captured: list[Value] = []

        def visit(inner):
            for value in inner.operands:
                found = values.get(value)
                if found is not None and found.node is not None and found not in captured:
                    captured.append(found)
                    found.node.users.add(node)
            return ir.WalkResult.ADVANCE

        for region in node.op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    inner.operation.walk(visit)
        node.captured = captured

    def roots_of(self, node: Node) -> tuple:
        op = node.op
        if op.name != "xhlo.fusion":
            return (node.kind,) * len(op.results)
        block = op.regions[0].blocks[0]
        arguments = list(block.arguments)
        roots = []
        for value in list(block.operations)[-1].operands:
            owner = value.owner
            if isinstance(owner, (ir.Operation, ir.OpView)):
                roots.append(kind_of(owner.operation))
            else:
                roots.append(node.operands[arguments.index(value)])
        return tuple(roots)

    # --- what the queue and the legality rules ask ----------------------------------------------

    @staticmethod
    def users_in_order(node: Node) -> list[Node]:
        return sorted(node.users, key=lambda user: user.position)

    @staticmethod
    def producers(node: Node) -> list[Node]:
        """The nodes of the block whose values `node` reads, in operand order."""
        found: list[Node] = []
        for value in node.operands:
            owner = value.node
            if owner is not None and owner not in found:
                found.append(owner)
        return found

    @staticmethod
    def same_block(producer: Node, consumer: Node) -> bool:
        return True  # a node's users are ops of its block, or the ops of it enclosing a use

    @staticmethod
    def not_fusible(node: Node, limits: FusionLimits) -> str | None:
        if node._refusal is False:
            node._refusal = None if node.op is None else not_fusible_reason(node.op, limits)
        return node._refusal

    @staticmethod
    def kind(node: Node) -> str:
        return node.kind

    @staticmethod
    def result_count(node: Node) -> int:
        return len(node.results)

    def body(self, node: Node) -> Body:
        if node._body is None:
            node._body = Body((node.kind,), (node.kind,)) if node.kind != "fusion" else Body.of(node.op)
        return node._body

    @staticmethod
    def updates_in_place(consumer: Node, producer: Node) -> bool:
        updated = consumer.in_place()
        return updated is not None and updated.node is producer

    @staticmethod
    def ops(node: Node) -> list[ir.Operation]:
        return node.ops()

    @staticmethod
    def creates_cycle(producer: Node, consumer: Node) -> bool:
        """Whether a path of uses other than the edge producer -> consumer leads from one to
        the other (nodes after the consumer are not followed: no path to it passes them)."""
        stack = [user for user in producer.users if user is not consumer]
        seen: set = set()
        limit = consumer.position
        while stack:
            node = stack.pop()
            if node is consumer:
                return True
            if node in seen or node.position > limit:
                continue
            seen.add(node)
            stack.extend(node.users)
        return False

    operand_count = staticmethod(merged_operand_count)

    def description(self, node: Node) -> str:
        if node._description is None:
            if node.op is not None:
                node._description = self.describe_op(node.op)
            else:
                node._description = f"{node.name}(fusion) at {self.describe_op.place(node.anchor.location)}"
        return node._description

    # --- costs ------------------------------------------------------------------------------------

    def flops(self, node: Node) -> float:
        if node._flops is None:
            node._flops = self.read_flops(node)
        return node._flops

    def read_flops(self, node: Node) -> float:
        return self.model.op_flops(node.op) if node.op is not None else self.model.ops_flops(node.ops())

    def traffic_of(self, node: Node) -> Traffic:
        if node.traffic is None:
            node.traffic = self.read_traffic(node)
        return node.traffic

    def read_traffic(self, node: Node) -> Traffic:
        """What `node` reads (each operand not folded into the code, with its defining node)
        and writes, as `CostModel.traffic` reads it off an op."""
        sizes = self.model.sizes
        reads = tuple((value, value.node, sizes(value.type)[1]) for value in node.operands if not value.folds)
        return Traffic(reads, sum(sizes(value.type)[1] for value in node.results))

    def op_time(self, node: Node) -> float:
        if node.alone is None:
            node.alone = self.alone_time(node)
        return node.alone

    def alone_time(self, node: Node) -> float:
        if node.kind in NOT_KERNELS:
            return 0.0
        traffic = self.traffic_of(node)
        return self.model.traffic_time([traffic], (node,), traffic.written, self.flops(node))

    def fused_time(self, producer: Node, consumer: Node) -> float:
        key = (producer, consumer)
        time = self.pairs.get(key)
        if time is None:
            time = self.pairs[key] = self.pair_time(producer, consumer)
        return time

    def pair_time(self, producer: Node, consumer: Node) -> float:
        flops = sum((self.flops(producer), self.flops(consumer)))
        consumer_traffic = self.traffic_of(consumer)
        return self.model.traffic_time([self.traffic_of(producer), consumer_traffic], (producer, consumer),
                                       consumer_traffic.written, flops)

    def time_saved(self, producer: Node, consumers: list[Node], producer_stays: bool) -> tuple[float, float, float]:
        return saving(self.op_time(producer), [self.op_time(c) for c in consumers],
                      [self.fused_time(producer, c) for c in consumers], producer_stays)

    # --- merging ------------------------------------------------------------------------------------

    def merge(self, producer: Node, consumer: Node, producer_dies: bool, namer) -> Node:
        """`producer` fused into `consumer`: a new node where the consumer stood, computing its
        results from what the two read (the producer's results aside), named as `build_fusion`
        names it. The producer stays (it is copied into the merge) unless `producer_dies`."""
        produced = producer.results
        roots_from = tuple(producer.roots_from[0] if isinstance(root, Value) and root in produced else root
                           for root in consumer.roots_from)
        roots = tuple(root if isinstance(root, str) else "parameter" for root in roots_from)
        kinds = self.body(producer).kinds + self.body(consumer).kinds
        fusion = Node(None, producer, consumer, "fusion", consumer.anchor, consumer.position)
        fusion.fusion_kind = "input" if "reduce" in roots else "loop"
        fusion.name = namer.unique(fusion_base_name(kinds, roots[0]))
        fusion.roots_from, fusion._body, fusion._refusal = roots_from, Body(kinds, roots), None
        operands = dict.fromkeys(producer.operands)  # first reads first, each value once
        operands.update(dict.fromkeys(consumer.operands))
        for value in produced:
            operands.pop(value, None)
        fusion.operands = list(operands)
        fusion.captured = [value for value in producer.captured + consumer.captured if value not in produced]
        fusion.results = consumer.results
        for value in fusion.results:
            value.node = fusion
        fusion.users = consumer.users
        self.merged_costs(fusion, producer, consumer)
        self.merged_uses(fusion, producer, consumer, producer_dies)
        for value in consumer.operands + consumer.captured:
            if value.node is not None:
                value.node.users.discard(consumer)
        if producer_dies:
            for value in producer.operands + producer.captured:
                if value.node is not None:
                    value.node.users.discard(producer)
            producer.alive = False
            self.at[producer.position] = None
        for value in fusion.operands + fusion.captured:
            if value.node is not None:
                value.node.users.add(fusion)
        consumer.alive = False
        self.at[fusion.position] = fusion
        results = set(fusion.results)
        for user in fusion.users:
            user.traffic = None  # it reads the fusion's values now
            if not results.isdisjoint(user.operands):  # (the return reads hundreds: no Python loop)
                user.version += 1  # its operands were redirected: MLIR's hash of it changed
        return fusion

    def merged_uses(self, fusion: Node, producer: Node, consumer: Node, producer_dies: bool) -> None:
        """The use lists as `build_fusion` leaves them: the fusion, created reading its
        operands, stands first in theirs; the consumer's uses move to the fusion's results one
        at a time from the first, so in reverse order; the erased members' uses go."""
        for index, value in enumerate(fusion.operands):
            value.read_uses().insert(0, (fusion, index))
            self.reordered[value] = None
        for value in fusion.results:
            value.read_uses().reverse()
            self.reordered[value] = None
        for member in (consumer, producer) if producer_dies else (consumer,):
            for index, value in enumerate(member.operands):
                if value.uses is not None:
                    value.uses.remove((member, index))

    def merged_costs(self, fusion: Node, producer: Node, consumer: Node) -> None:
        """The merge's flops (the two's sum, exact for whole numbers, which loop and input
        fusions have; else summed over its ops, as the cost model sums a body) and traffic
        (what the two read but the producer's results, once each; what the consumer wrote)."""
        producer_flops, consumer_flops = self.flops(producer), self.flops(consumer)
        total = producer_flops + consumer_flops
        if producer_flops.is_integer() and consumer_flops.is_integer() and total < EXACT_FLOPS:
            fusion._flops = total
        producer_traffic, consumer_traffic = self.traffic_of(producer), self.traffic_of(consumer)
        reads, seen = [], set()
        for value, owner, size in producer_traffic.reads + consumer_traffic.reads:
            if owner is not producer and value not in seen:
                seen.add(value)
                reads.append((value, owner, size))
        fusion.traffic = Traffic(tuple(reads), consumer_traffic.written)

    # --- building the fusions ---------------------------------------------------------------------

    def build(self) -> None:
        """Build each merge left in the block as one xhlo.fusion before the op it stands for,
        redirect that op's uses to it, and erase the ops merged away."""
        built = []
        for node in self.at:
            if node is None or node.op is not None:
                continue
            fusion = new_fusion(node, emit, node.anchor, node.anchor.location, node.fusion_kind, node.name)
            built.append((node.anchor, fusion))
            node.built = fusion
        for anchor, fusion in built:
            for old, new in zip(anchor.results, fusion.results):
                old.replace_all_uses_with(new)
        for node in reversed(self.nodes):
            if not node.alive:
                erase(node.op)
        self.order_uses()

    def order_uses(self) -> None:
        """Give each value whose use list the merges changed the order they left it in: setting
        an operand, even to the value it holds, puts its use first in the value's list."""
        for value in self.reordered:
            uses = value.uses
            if len(uses) < 2:
                continue
            node = value.node
            mlir_value = value.value if node is None or node.built is None else node.built.results[node.results.index(value)]
            for user, index in reversed(uses):
                if isinstance(user, Node):
                    user = user.op if user.built is None else user.built
                user.operands[index] = mlir_value


def emit(node: Node, inputs: list[ir.Value]) -> list[ir.Value]:
    """`node`'s ops at the current insertion point, reading `inputs` for its operands; the
    values of its results. A merge's two parts each see their own operands only, as the body
    of a fusion does."""
    if node.op is None:
        values = dict(zip(node.operands, inputs))
        producer, consumer = node.producer, node.consumer
        values[producer.results[0]] = emit(producer, [values[value] for value in producer.operands])[0]
        return emit(consumer, [values[value] for value in consumer.operands])
    return emit_op(node.op, inputs)


def emit_op(op: ir.Operation, inputs: list[ir.Value]) -> list[ir.Value]:
    """An op of the block (a fusion: its body's ops) at the current insertion point, reading
    `inputs` for its operands; the values of its results."""
    if op.name != "xhlo.fusion":
        clone = op.clone()
        operands = clone.operands
        for index, value in enumerate(inputs):
            operands[index] = value
        return list(clone.results)
    block = op.regions[0].blocks[0]
    mapping = dict(zip(block.arguments, inputs))
    inner_ops = [inner.operation for inner in block.operations]
    for inner in inner_ops[:-1]:
        clone_into(inner, mapping)
    return [mapping[value] for value in inner_ops[-1].operands]


def clone_into(op: ir.Operation, mapping: dict) -> ir.Operation:
    """A clone of `op` at the current insertion point reading `mapping`'s values for the
    operands it maps; its results are added to `mapping`."""
    clone = op.clone()
    for index, value in enumerate(op.operands):
        if value in mapping:
            clone.operands[index] = mapping[value]
    for result, new in zip(op.results, clone.results):
        mapping[result] = new
    return clone


def new_fusion(kernel, emit_body, before: ir.Operation, location: ir.Location, kind: str, name: str) -> ir.Operation:
    """An `xhlo.fusion` before `before` reading `kernel`'s operands, its body what
    `emit_body(kernel, arguments)` emits, with its kind and name. `kernel` is a node of this
    graph or of the multi-output graph: both have `operands` and `results` of values with
    `value` and `type`."""
    with ir.InsertionPoint(before):
        fusion = create_op("xhlo.fusion", [value.value for value in kernel.operands],
                           [value.type for value in kernel.results], {}, location, region_count=1)
    types = [value.type for value in kernel.operands]
    body = ir.Block.create_at_start(fusion.regions[0], types, [location] * len(types))
    with ir.InsertionPoint(body):
        create_op("xhlo.return", emit_body(kernel, list(body.arguments)), [], {}, location)
    fusion.attributes["kind"] = ir.StringAttr.get(kind)
    fusion.attributes["name"] = ir.StringAttr.get(name)
    return fusion
