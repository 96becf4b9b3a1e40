"""The block multi-output fusion decides on, as plain Python objects, and the fusions it
decided, built in MLIR once at the end.

Multi-output fusion merges one group of siblings or one producer-consumer pair at a time and
then scans the block again from its start (65 scans on the Adam update); made in MLIR, each
scan read every op, value and use list through the bindings again and each merge built a
fusion and moved bodies. Here a block is read once into `Kernel`s (an op of the block, or the
merge of several kernels as they were) and `Value`s; the scans and merges run on them, and
only the fusions left at the end are built (`MultiOutputGraph.build`), each once, its body its
members' ops in order.

What the graph keeps of the MLIR block, because decisions or later passes depend on it, as
`priority_fusion.build_fusion` left it after each merge:
- order (`order`): a merge stands where its last member stood, and the kernels before it that
  use its results (a sibling's users) move after it, in order;
- each value's use list in MLIR's order (the producer-consumer rule takes a producer's users
  in that order, later passes too): the fusion, created reading its inputs, stands first in
  theirs; an exposed value's uses move to the fusion's result one at a time, so reversed; the
  members' uses go when they are erased. Re-established after the build by setting each
  operand again (a set puts its use first);
- users: the kernels of the block reading a value, directly or from inside their regions.
"""

from mlirxla.ir_queries import defining_op
from mlirxla.mlir import ir

from .erasure import erase, identity
from .fusion_graph import TERMINATORS, emit_op, fusion_base_name, merged_operand_count, new_fusion
from .fusion_legality import Body, fused_ops, in_place_pair, kind_of, not_fusible_reason


class Value:
    """A value kernels read: a result of a kernel of the block (`kernel`; a merge takes over
    the values it exposes), or a block argument or value from outside the block. `value` is
    the MLIR value it stands for until the fusions are built; `root` says what computes it
    inside its kernel: the MLIR op, or the `Value` a fusion returns as it is (a parameter)."""

    __slots__ = ("kernel", "value", "type", "root", "_uses")

    def __init__(self, kernel, value: ir.Value, root=None):
        self.kernel, self.value, self.type, self.root = kernel, value, value.type, root
        self._uses: list | None = None  # (user, operand number, the kernel of the block using it or None)

    def uses(self, graph: "MultiOutputGraph") -> list:
        if self._uses is None:
            self._uses = graph.read_uses(self.value)
        return self._uses


class Kernel:
    """An op of the block (`op`), or a merge of `members` whose results are `results` (the
    members' values it exposes)."""

    __slots__ = ("op", "members", "operands", "results", "terminator", "name", "kind", "anchor", "body", "ops",
                 "alive", "built", "facts")

    def __init__(self, op, members: list, anchor: ir.Operation):
        self.op, self.members, self.anchor = op, members, anchor
        self.operands: list[Value] = []
        self.results: list[Value] = []
        self.terminator = False
        self.name = self.kind = None
        self.body: Body | None = None
        self.ops: list[ir.Operation] = []  # the MLIR ops of its body, in order
        self.alive = True
        self.built: ir.Operation | None = None
        self.facts: dict = {}  # what multi-output fusion asks of it, once


class MultiOutputGraph:
    """One block as kernels, the merges decided on them, and `build`."""

    def __init__(self, block: ir.Block):
        self.block = block
        self.values: dict[ir.Value, Value] = {}
        self.kernels: list[Kernel] = []  # the block's ops, in their first order
        self.by_identity: dict[int, Kernel] = {}
        self.touched: dict[Value, None] = {}  # values whose use lists merges changed
        self.arguments: list[Value] = []
        self.read_block()
        self.order: list[Kernel] = list(self.kernels)
        self.position: dict[Kernel, int] = {}
        self.number()
        # per kernel, as found so far (kept true by each merge): its users, and the kernels
        # reachable from it
        self.found_users: dict[Kernel, list[Kernel]] = {}
        self.descendants: dict[Kernel, set] = {}

    # --- reading the block ---------------------------------------------------------------------

    def read_block(self) -> None:
        values = self.values
        for argument in self.block.arguments:
            self.arguments.append(value := Value(None, argument))
            values[argument] = value
        for handle in self.block.operations:
            op = handle.operation
            kernel = Kernel(op, [], op)
            kernel.terminator = op.name in TERMINATORS
            kernel.operands = [self.value_of(value) for value in op.operands]
            kernel.ops = fused_ops(op)
            kernel.body = Body.of(op)
            roots = self.fusion_roots(op, kernel) if op.name == "xhlo.fusion" else [op] * len(op.results)
            for result, root in zip(op.results, roots):
                kernel.results.append(value := Value(kernel, result, root))
                values[result] = value
            self.kernels.append(kernel)
            self.by_identity[identity(op)] = kernel

    def value_of(self, value: ir.Value) -> Value:
        found = self.values.get(value)
        if found is None:
            found = self.values[value] = Value(None, value)
        return found

    @staticmethod
    def fusion_roots(op: ir.Operation, kernel: Kernel) -> list:
        block = op.regions[0].blocks[0]
        arguments = list(block.arguments)
        roots = []
        for value in list(block.operations)[-1].operands:
            owner = defining_op(value)
            roots.append(owner if owner is not None else kernel.operands[arguments.index(value)])
        return roots

    def read_uses(self, value: ir.Value) -> list:
        uses = []
        for use in value.uses:
            owner = use.owner.operation
            kernel = self.by_identity.get(identity(owner))
            if kernel is not None:
                uses.append((kernel, use.operand_number, kernel))
            else:
                uses.append((owner, use.operand_number, self.enclosing(owner)))
        return uses

    def enclosing(self, op: ir.Operation) -> Kernel | None:
        """The kernel of the block holding `op` in its regions, or None."""
        while op.block != self.block:
            parent = op.parent
            if parent is None or parent.name == "builtin.module":
                return None
            op = parent.operation
        return self.by_identity.get(identity(op))

    def number(self) -> None:
        self.position = {kernel: index for index, kernel in enumerate(self.order)}

    # --- what the scans ask ----------------------------------------------------------------------

    def scanned_values(self) -> list[Value]:
        """The block's arguments, then each kernel's results in block order."""
        found = list(self.arguments)
        for kernel in self.order:
            found.extend(kernel.results)
        return found

    def users(self, kernel: Kernel) -> list[Kernel]:
        """The distinct kernels of the block using one of `kernel`'s results, in the order of
        its uses."""
        found = self.found_users.get(kernel)
        if found is None:
            found = self.found_users[kernel] = []
            for value in kernel.results:
                for _, _, user in value.uses(self):
                    if user is not None and user not in found:
                        found.append(user)
        return found

    def reaches(self, source: Kernel, target: Kernel) -> bool:
        """Is there a path of uses from `source` to `target`? (One walk per source, however
        many targets and merges.)"""
        return target in self.reachable_from(source)

    def reachable_from(self, source: Kernel) -> set:
        found = self.descendants.get(source)
        if found is None:
            found = self.descendants[source] = set()
            stack = list(self.users(source))
            while stack:
                kernel = stack.pop()
                if kernel not in found:
                    found.add(kernel)
                    stack.extend(self.users(kernel))
        return found

    def reachable_indirectly(self, source: Kernel, target: Kernel) -> bool:
        """Is there a path of uses from `source` to `target` other than the edge between them?"""
        limit = self.position[target]
        stack = [user for user in self.users(source) if user is not target]
        seen: set = set()
        while stack:
            kernel = stack.pop()
            if kernel is target:
                return True
            if kernel in seen or self.position[kernel] > limit:
                continue
            seen.add(kernel)
            stack.extend(self.users(kernel))
        return False

    @staticmethod
    def operand_union(members: list[Kernel]) -> list[Value]:
        """What a fusion of `members` reads: their operands but their own results, once each."""
        taken = {value for member in members for value in member.results}
        inputs: list[Value] = []
        for member in members:
            for value in member.operands:
                if value not in taken:
                    taken.add(value)
                    inputs.append(value)
        return inputs

    # --- what the legality rules ask (fusion_legality.fusion_refusal's `kernels`) -----------------

    @staticmethod
    def same_block(producer: Kernel, consumer: Kernel) -> bool:
        return True

    @staticmethod
    def not_fusible(kernel: Kernel, limits) -> str | None:
        # a merge is a loop or input fusion of kernels that passed
        return None if kernel.op is None else not_fusible_reason(kernel.op, limits)

    @staticmethod
    def kind(kernel: Kernel) -> str:
        return "fusion" if kernel.op is None else kind_of(kernel.op)

    @staticmethod
    def result_count(kernel: Kernel) -> int:
        return len(kernel.results)

    @staticmethod
    def body(kernel: Kernel) -> Body:
        return kernel.body

    @staticmethod
    def updates_in_place(consumer: Kernel, producer: Kernel) -> bool:
        # a merge's members are no in-place updates (multi-output fusion refuses them)
        pair = in_place_pair(consumer.op) if consumer.op is not None else None
        return pair is not None and consumer.operands[pair[0]].kernel is producer

    @staticmethod
    def ops(kernel: Kernel) -> list[ir.Operation]:
        return kernel.ops

    def creates_cycle(self, producer: Kernel, consumer: Kernel) -> bool:
        return self.reachable_indirectly(producer, consumer)

    operand_count = staticmethod(merged_operand_count)

    # --- merging ---------------------------------------------------------------------------------

    def merge(self, members: list[Kernel], exposed: list[Value], namer) -> Kernel:
        """One fusion of `members` (in block order) exposing `exposed`, as `build_fusion` makes
        it: every member dies (each result is exposed or read by members only)."""
        anchor = members[-1]
        fusion = Kernel(None, members, anchor.anchor)
        fusion.operands = self.operand_union(members)
        inside = nested(fusion)
        roots = [self.root_kind(value, inside) for value in exposed]
        fusion.kind = "input" if "reduce" in roots else "loop"
        kinds = tuple(kind for member in members for kind in member.body.kinds)
        fusion.name = namer.unique(fusion_base_name(kinds, roots[0]))
        fusion.body = Body(kinds, tuple(roots))
        fusion.ops = [op for member in members for op in member.ops]
        fusion.results = list(exposed)
        self.merged_uses(fusion, members)
        for value in exposed:
            value.kernel = fusion
        for member in members:
            member.alive = False
        self.found_after_merge(fusion, set(members))
        place = self.position[anchor]
        self.order[place] = fusion
        self.order = [kernel for kernel in self.order if kernel.alive]
        self.number()
        if any(value not in anchor.results for value in exposed):
            self.move_users_after(fusion)
        return fusion

    def found_after_merge(self, fusion: Kernel, members: set) -> None:
        """The users and reachable kernels found before `members` became `fusion`, made true
        after it. Users lists naming a member are found again (from the merged uses, in their
        order). A kernel that reached a member reaches the fusion and what the fusion reaches;
        the merge changes no other kernel's. Walking again from every kernel after each merge
        made a gradient of 64 layers' stacked weights (78 merges over 1,000 kernels) spend
        0.3 s in this pass."""
        for kernel in [kernel for kernel, users in self.found_users.items() if kernel in members or not members.isdisjoint(users)]:
            del self.found_users[kernel]
        for member in members:
            self.descendants.pop(member, None)
        reached = [found for found in self.descendants.values() if not members.isdisjoint(found)]
        if reached:
            beyond = self.reachable_from(fusion)
            for found in reached:
                found -= members
                found.add(fusion)
                found |= beyond

    def root_kind(self, value: Value, inside: set) -> str:
        root = self.root_op(value, inside)
        return "parameter" if root is None else kind_of(root)

    def root_ops(self, kernel: Kernel) -> list[ir.Operation | None]:
        """The op computing each result of `kernel` in its body (None: a parameter it returns)."""
        if kernel.op is not None and kernel.op.name != "xhlo.fusion":
            return [kernel.op] * len(kernel.results)
        return [self.root_op(value, nested(kernel)) for value in kernel.results]

    @staticmethod
    def root_op(value: Value, inside: set) -> ir.Operation | None:
        """The op computing `value` in a fusion of the kernels `inside`, or None for a
        parameter of it."""
        root = value.root
        while isinstance(root, Value):
            if root.kernel not in inside:
                return None
            root = root.root
        return root

    def merged_uses(self, fusion: Kernel, members: list[Kernel]) -> None:
        """The use lists as `build_fusion` leaves them: the fusion first in its inputs' lists;
        each exposed value's uses reversed (moved to the fusion's result one at a time); the
        members' uses gone."""
        for index, value in enumerate(fusion.operands):
            value.uses(self).insert(0, (fusion, index, fusion))
            self.touched[value] = None
        for value in fusion.results:
            value.uses(self).reverse()
            self.touched[value] = None
        dead = set(members)
        for value in {value for member in members for value in member.operands}:
            uses = value.uses(self)
            uses[:] = [use for use in uses if use[2] not in dead]

    def move_users_after(self, fusion: Kernel) -> None:
        """Kernels before `fusion` that (transitively) use its results move after it, in order."""
        at = self.position[fusion]
        late: set = set()
        frontier = list(self.users(fusion))
        while frontier:
            kernel = frontier.pop()
            if kernel not in late and self.position[kernel] < at:
                late.add(kernel)
                frontier.extend(self.users(kernel))
        if not late:
            return
        moved = sorted(late, key=self.position.__getitem__)
        kept = [kernel for kernel in self.order if kernel not in late]
        at = kept.index(fusion) + 1
        self.order = kept[:at] + moved + kept[at:]
        self.number()

    # --- building the fusions --------------------------------------------------------------------

    def build(self) -> None:
        """Build each merge left as one xhlo.fusion, redirect the uses of the values it exposes
        to it, erase the ops merged away, and give the block the order and the values the use
        lists the merges left."""
        built = []
        terminator = self.order[-1].op
        for kernel in self.order:
            if kernel.op is not None:
                continue
            kernel.built = new_fusion(kernel, emit, terminator, kernel.anchor.location, kernel.kind, kernel.name)
            built.append(kernel)
        for kernel in built:
            for value, new in zip(kernel.results, kernel.built.results):
                value.value.replace_all_uses_with(new)
                value.value = new
        for kernel in reversed(self.kernels):
            if not kernel.alive:
                erase(kernel.op)
        for kernel in self.order[:-1]:
            (kernel.op or kernel.built).move_before(terminator)
        self.order_uses()

    def order_uses(self) -> None:
        """Give each value whose use list the merges changed the order they left it in: setting
        an operand, even to the value it holds, puts its use first in the value's list."""
        for value in self.touched:
            if value.kernel is not None and not value.kernel.alive:
                continue  # read by members of a merge only: it is gone
            uses = value.uses(self)
            if len(uses) < 2:
                continue
            for user, index, _ in reversed(uses):
                if isinstance(user, Kernel):
                    user = user.op or user.built
                user.operands[index] = value.value


def nested(kernel: Kernel) -> set:
    """`kernel` and every kernel merged into it."""
    found = {kernel}
    for member in kernel.members:
        found |= nested(member)
    return found


def emit(kernel: Kernel, inputs: list[ir.Value]) -> list[ir.Value]:
    """`kernel`'s ops at the current insertion point, reading `inputs` for its operands; the
    values of its results."""
    if kernel.op is None:
        values = dict(zip(kernel.operands, inputs))
        for member in kernel.members:
            outputs = emit(member, [values[value] for value in member.operands])
            values.update(zip(member.results, outputs))
        return [values[value] for value in kernel.results]
    return emit_op(kernel.op, inputs)
