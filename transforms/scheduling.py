"""xhlo-scheduling: a sequential order for every computation that keeps peak live memory low
(XLA's HloMemoryScheduler with its list, DFS and post-order schedulers; the best one wins).

Every block (function bodies and the bodies of regions) is scheduled on its own; the block's op
order IS the schedule, so applying it moves ops, respecting dependencies and keeping the
terminator last. Memory model of one block: an op allocates its results' bytes when it runs
(bitcasts, tuples and get_tuple_element alias their operands and allocate nothing); a value
defined in the block is freed once its last user in the block has run, unless the terminator
returns it; values from outside the block are not counted. An op with regions is charged its
inner computations' peak while it runs. Candidates:

- `list`: XLA's list scheduler, greedily picking the ready op that frees the most bytes minus
  the bytes it allocates (ties: source order);
- `dfs`: a post-order depth-first walk from the terminator that visits the operand with the
  largest subtree first;
- `post-order`: a plain post-order walk from the terminator, operands in order;
- `original`: the source order.

Side-effecting ops keep their relative order. Records `xhlo.schedule = {algorithm, peak_bytes}`
on each function and on the module (the entry's algorithm, the largest peak), and reports
every computation's schedule and candidate peaks (`schedule.txt`). Changed: any op moved or
any schedule attribute written.
"""

import math
from dataclasses import dataclass
from typing import ClassVar

from mlirxla.dialects.xhlo import Xhlo
from mlirxla.dialects.xhlo.types import bit_width
from mlirxla.ir_queries import entry_function, function_name
from mlirxla.mlir import ir

from .copy_insertion import is_carried_value_copy
from .dead_code_elimination import has_side_effect
from .erasure import identity
from .pass_base import ModulePass, PassResult, TextReport, rendering_reports

ALIASING_OPS = frozenset({"xhlo.bitcast", "xhlo.tuple", "xhlo.get_tuple_element", "xhlo.optimization_barrier"})
ORDERED_OPS = frozenset({"xhlo.custom_call", "xhlo.rng", "xhlo.rng_bit_generator", "xhlo.after_all", "xhlo.outfeed", "xhlo.infeed", "xhlo.send", "xhlo.recv"})
CANDIDATES = ("list", "dfs", "post-order", "original")
ISOLATED_OPS = frozenset(op.OPERATION_NAME for op in Xhlo.operations if ir.IsIsolatedFromAboveTrait in op._traits)


def type_bytes(t: ir.Type) -> int:
    """Bytes of one value of type `t` (tuples: XLA's 8-byte pointer table; tokens: 0)."""
    if isinstance(t, ir.RankedTensorType):
        return math.prod(t.shape) * max(1, (bit_width(t.element_type) + 7) // 8)
    if isinstance(t, ir.TupleType):
        return 8 * t.num_types
    return 0


def op_bytes(op: ir.Operation) -> int:
    if op.name in ALIASING_OPS:
        return 0
    return sum(type_bytes(r.type) for r in op.results)


def is_ordered(op: ir.Operation) -> bool:
    return op.name in ORDERED_OPS or len(op.results) == 0 or has_side_effect(op)


def nested_operands(op: ir.Operation) -> list[ir.Value]:
    """Operands of `op` and of every op nested in its regions; of an op whose regions are
    isolated from above (a fusion, a reduce: the verifier holds every use inside to values
    defined inside), its own: nothing nested reads a value of the block, and it is not walked."""
    if not len(op.regions) or op.name in ISOLATED_OPS:
        return list(op.operands)  # no walk (a Python call per op) for an op holding none
    values = []

    def visit(inner):
        values.extend(inner.operation.operands)
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return values


@dataclass
class BlockGraph:
    """The ops of one block (terminator excluded) with their in-block dependencies."""

    ops: list[ir.Operation]
    terminator: ir.Operation | None
    operands: list[list[int]]  # per op: producer indices (with repeats removed)
    users: list[list[int]]
    bytes: list[int]
    inner_peak: list[int]
    returned: set[int]  # ops with a result the terminator returns

    @classmethod
    def of(cls, block: ir.Block, inner_peak_of) -> "BlockGraph":
        all_ops = [op.operation for op in block.operations]
        terminator = all_ops[-1] if all_ops and all_ops[-1].name in ("xhlo.return", "func.return") else None
        ops = all_ops[:-1] if terminator is not None else all_ops
        carried = carried_value_copies(block, ops, terminator)
        ops = [op for op in ops if op not in carried] + [op for op in ops if op in carried]
        index = {op: i for i, op in enumerate(ops)}
        operands = []
        for op in ops:
            deps = []
            for value in nested_operands(op):
                if isinstance(value, ir.OpResult):
                    producer = index.get(value.owner.operation)
                    if producer is not None and producer not in deps and value.owner.operation != op:
                        deps.append(producer)
            if op in carried:
                deps += [i for i in range(len(ops) - len(carried)) if i not in deps]
            operands.append(deps)
        previous_ordered = None
        for i, op in enumerate(ops):
            if is_ordered(op):
                if previous_ordered is not None and previous_ordered not in operands[i]:
                    operands[i].append(previous_ordered)
                previous_ordered = i
        users = [[] for _ in ops]
        for i, deps in enumerate(operands):
            for d in deps:
                users[d].append(i)
        returned = set()
        if terminator is not None:
            for value in terminator.operands:
                if isinstance(value, ir.OpResult) and value.owner.operation in index:
                    returned.add(index[value.owner.operation])
        return cls(ops, terminator, operands, users, [op_bytes(op) for op in ops], [inner_peak_of(op) for op in ops], returned)

    def is_block_order(self, order: list[int], block: ir.Block) -> bool:
        """Whether `order` is the order the ops stand in `block` now."""
        placed = [self.ops[i] for i in order]
        members = set(placed)
        return placed == [op.operation for op in block.operations if op.operation in members]

    def peak(self, order: list[int]) -> int:
        remaining = [len(u) for u in self.users]
        live = peak = 0
        for i in order:
            live += self.bytes[i]
            peak = max(peak, live + self.inner_peak[i])
            for d in self.operands[i]:
                remaining[d] -= 1
                if remaining[d] == 0 and d not in self.returned:
                    live -= self.bytes[d]
            if not self.users[i] and i not in self.returned:
                live -= self.bytes[i]
        return peak

    def roots(self) -> list[int]:
        """Start points of the walks: producers of returned values, then ops nothing uses."""
        found = []
        if self.terminator is not None:
            index = {op: i for i, op in enumerate(self.ops)}
            for value in self.terminator.operands:
                if isinstance(value, ir.OpResult) and value.owner.operation in index:
                    found.append(index[value.owner.operation])
        found += [i for i in range(len(self.ops)) if not self.users[i]]
        return found

    def list_schedule(self) -> list[int]:
        remaining_users = [len(u) for u in self.users]
        waiting = [len(d) for d in self.operands]
        ready = {i for i in range(len(self.ops)) if waiting[i] == 0}
        order = []
        while ready:
            def priority(i):
                freed = sum(self.bytes[d] for d in self.operands[i] if remaining_users[d] == 1 and d not in self.returned)
                return (freed - self.bytes[i], -i)

            best = max(ready, key=priority)
            ready.remove(best)
            order.append(best)
            for d in self.operands[best]:
                remaining_users[d] -= 1
            for u in self.users[best]:
                waiting[u] -= 1
                if waiting[u] == 0:
                    ready.add(u)
        return order

    def subtree_bytes(self) -> list[int]:
        sizes: list[int | None] = [None] * len(self.ops)
        for i in range(len(self.ops)):  # source order is a topological order
            sizes[i] = self.bytes[i] + sum(sizes[d] for d in self.operands[i])
        return sizes

    def walk_schedule(self, largest_first: bool) -> list[int]:
        sizes = self.subtree_bytes()
        done = [False] * len(self.ops)
        order = []

        def visit(root):
            stack = [(root, False)]
            while stack:
                i, expanded = stack.pop()
                if done[i]:
                    continue
                if expanded:
                    done[i] = True
                    order.append(i)
                    continue
                stack.append((i, True))
                deps = [d for d in self.operands[i] if not done[d]]
                if largest_first:
                    deps.sort(key=lambda d: (sizes[d], -d))  # popped last = visited first
                else:
                    deps.reverse()
                stack.extend((d, False) for d in deps)

        for root in self.roots() + list(range(len(self.ops))):
            visit(root)
        return self.keep_ordered(order)

    def keep_ordered(self, order: list[int]) -> list[int]:
        """Dependencies hold by construction of the walk; this only double-checks."""
        position = {i: k for k, i in enumerate(order)}
        assert all(position[d] < position[i] for i in order for d in self.operands[i])
        return order

    def candidates(self) -> dict[str, list[int]]:
        return {
            "list": self.list_schedule(),
            "dfs": self.walk_schedule(largest_first=True),
            "post-order": self.walk_schedule(largest_first=False),
            "original": list(range(len(self.ops))),
        }


@dataclass
class BlockSchedule:
    label: str
    algorithm: str
    peaks: dict[str, int]
    ops: list[ir.Operation]

    @property
    def peak(self) -> int:
        return self.peaks[self.algorithm]


def schedule_block(block: ir.Block, label: str, results: list[BlockSchedule]) -> tuple[int, bool]:
    """Schedule `block` (inner blocks first); returns (peak bytes, whether ops moved)."""
    moved = False
    positions: dict[int, int] = {}  # op -> its place in the block, for inner blocks' labels (read once needed)

    def inner_peak(op: ir.Operation) -> int:
        nonlocal moved
        peak = 0
        for r, region in enumerate(op.regions):
            if not positions:
                positions.update((identity(other), k) for k, other in enumerate(block.operations))
            for b, inner in enumerate(region.blocks):
                inner_label = f"{label}/{op.name.removeprefix('xhlo.')}#{positions.get(identity(op), -1)}.region{r}"
                p, m = schedule_block(inner, inner_label, results)
                peak = max(peak, p)
                moved = moved or m
        return peak

    graph = BlockGraph.of(block, inner_peak)
    orders = graph.candidates()
    peaks = {name: graph.peak(order) for name, order in orders.items()}
    best = min(CANDIDATES, key=lambda name: (peaks[name], CANDIDATES.index(name) if name != "original" else -1))
    order = orders[best]
    if not graph.is_block_order(order, block):
        anchor = graph.terminator
        for i in order:
            if anchor is not None:
                graph.ops[i].move_before(anchor)
        if anchor is None:  # no terminator: rebuild by moving after one another
            for k in range(len(order) - 2, -1, -1):
                graph.ops[order[k]].move_before(graph.ops[order[k + 1]])
        moved = True
    results.append(BlockSchedule(label, best, peaks, [graph.ops[i] for i in order]))
    return peaks[best], moved


def carried_value_copies(block: ir.Block, ops: list[ir.Operation], terminator: ir.Operation | None) -> list[ir.Operation]:
    """The copies of a while body that write its carried values; they run after every other
    op of the body (see `is_carried_value_copy`)."""
    parent = block.owner
    if terminator is None or parent is None or parent.name != "xhlo.while" or block != parent.regions[1].blocks[0]:
        return []
    return [op for op in ops if is_carried_value_copy(op, terminator)]


def schedule_attr(algorithm: str, peak: int) -> ir.Attribute:
    return ir.DictAttr.get({
        "algorithm": ir.StringAttr.get(algorithm),
        "peak_bytes": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), peak),
    })


def previous_schedule(func: ir.Operation) -> tuple[str, int] | None:
    if "xhlo.schedule" not in func.attributes:
        return None
    attr = ir.DictAttr(func.attributes["xhlo.schedule"])
    return ir.StringAttr(attr["algorithm"]).value, ir.IntegerAttr(attr["peak_bytes"]).value


def schedule_module(module: ir.Module) -> tuple[list[BlockSchedule], bool]:
    results: list[BlockSchedule] = []
    moved = False
    with module.context, ir.Location.unknown():
        entry = entry_function(module)
        module_algorithm, module_peak = "original", 0
        for func in [op.operation for op in module.body.operations if op.operation.name == "func.func"]:
            if not func.regions[0].blocks:
                continue
            peak, m = schedule_block(func.regions[0].blocks[0], f"@{function_name(func)}", results)
            moved = moved or m
            algorithm = results[-1].algorithm
            previous = previous_schedule(func)
            if not m and previous is not None and previous[1] == peak:
                algorithm = results[-1].algorithm = previous[0]  # already in that schedule: keep its name
            func.attributes["xhlo.schedule"] = schedule_attr(algorithm, peak)
            module_peak = max(module_peak, peak)
            if func == entry:
                module_algorithm = algorithm
        module.operation.attributes["xhlo.schedule"] = schedule_attr(module_algorithm, module_peak)
    return results, moved


def op_label(op: ir.Operation, names: ir.AsmState) -> str:
    results = ", ".join(r.get_name(names) for r in op.results)
    types = ", ".join(str(r.type) for r in op.results)
    return f"{results} = {op.name} : {types}" if results else op.name


@dataclass(frozen=True)
class SchedulingPass(ModulePass):
    """Reorders each computation's ops to the lowest-peak of the list, DFS, post-order and source schedules."""

    name: ClassVar[str] = "xhlo-scheduling"
    summary: ClassVar[str] = "memory-minimizing sequential schedule (list, DFS, post-order; keep the best)"

    def run(self, module: ir.Module) -> PassResult:
        before = str(module.operation.attributes["xhlo.schedule"]) if "xhlo.schedule" in module.operation.attributes else None
        results, moved = schedule_module(module)
        changed = moved or str(module.operation.attributes["xhlo.schedule"]) != before
        if not rendering_reports():
            return PassResult(changed)
        return PassResult(changed, TextReport({"schedule.txt": report(results, module)}))


def report(results: list[BlockSchedule], module: ir.Module) -> str:
    names = ir.AsmState(module.operation)  # one naming of the whole module, not one per value
    lines = []
    for s in results:
        peaks = ", ".join(f"{name}={s.peaks[name]}" for name in CANDIDATES)
        lines.append(f"computation {s.label}: algorithm={s.algorithm} peak_bytes={s.peak} (candidates: {peaks})")
        for k, op in enumerate(s.ops):
            lines.append(f"  {k}: {op_label(op, names)}")
        lines.append("")
    return "\n".join(lines)
