"""xhlo-buffer-assignment: logical buffers, live ranges over the schedule and one packed temp
slab (XLA's BufferAssignment with HeapSimulator). Only analyzes; writes a summary attribute.

Values and aliases. Every tensor value is a logical value; values that must share storage are
grouped (union-find) into buffers: a bitcast, an optimization_barrier result and a
get_tuple_element of an `xhlo.tuple` share their source; a while's init operand, its condition
and body arguments, the body's returned value and the while result share one buffer; a
conditional branch's arguments share the conditional's operands and its returned values the
conditional's results; an in-place `dynamic_update_slice` (or a fusion rooted in one) or
one-input `scatter` (XLA's scatter is in place too; the operand must not be its indices or
updates as well) shares its operand's buffer when the operand is a temp with no later use,
and so may an elementwise op's result, or each result of a loop fusion reading the operand
elementwise, take over a same-size operand's buffer (option `share-elementwise`, on by
default, as XLA's CanShareOperandBufferWithUser). Copies never
alias. Fusion and other region bodies (reducers, sort comparators, ...) are opaque: one
kernel, their inner values get no buffers.

Schedule and live ranges. Ops are numbered in block order (the block order is the schedule,
see xhlo-scheduling). While loops and conditional branches are flattened, as XLA's HloLiveRange
does: the condition, then the body (or each branch in turn) take the time steps just before
their op. A value lives from its definition to its last use; a use inside an opaque region
counts at the enclosing op, and a use inside a loop or branch of a value defined outside it
counts at the loop or conditional op itself, so outer values stay live for the whole loop. A
while's own operands are read at the loop's first step: the carried buffer they alias holds
the condition's and body's arguments from there on.
Values inside loop bodies and branches are temps like any other, packed in the same slab by
their (flattened) live ranges — the choice XLA makes too.

Donation. A donated parameter (`tf.aliasing_output`, or `jax.buffer_donor` matched to the
first free output of its type) holds its output when nothing reads the parameter after the
output's buffer is first written (or only the op writing it, elementwise, in place); else
the output keeps its own buffer. The dump says which (`Donation:` lines).

Allocation kinds: `parameter` (entry arguments and everything aliased to them), `constant`
(xhlo.constant values), `maybe-live-out` (values the entry returns; one allocation each), and
`temp`: every other buffer, packed into ONE slab by heap_simulator.pack (decreasing-size
best fit, spatial and temporal orderings, the smaller kept), at offsets aligned to the
pass's `alignment` (the backend's: the cpu pipeline is built with the cpu backend's).

Scratch. Memory a backend's step holds only while it runs (a kernel's working memory, known
once the kernel is lowered; im2col rows) is planned in the same slab afterwards, by the
backend, with `place_scratch`: an interval live at its op's time step(s) only, put in the
tightest gap the temps and scratch live then leave free (above them all when none fits, the
slab growing), so that it shares memory with values dead while it runs. The temps keep the
offsets this pass gave them. `kernel_scratch_bytes` sums the scratch placed (0 when the pass
alone ran); the dump files list each scratch interval with what it holds. The backend
rewrites the dump files with the assignment it executes, scratch included (the cpu
backend: `backends/cpu/compiler.py`), so the files describe the executable.

Writes `xhlo.buffer_assignment = {temp_bytes, parameter_bytes, live_out_bytes, constant_bytes,
total_bytes, peak_live_bytes, allocations, kernel_scratch_bytes}` on the module and reports the
whole assignment (`BufferAssignmentReport`: `buffer-assignment.txt`, `memory-usage-report.txt`,
`live-range.txt`, `heap.svg`). Changed: that attribute written or updated.
"""

from collections import defaultdict
from dataclasses import dataclass, field
from typing import ClassVar

from mlirxla.mlir import ir

from .fusion_legality import ELEMENTWISE, elementwise_read_operands, in_place_pair, kind_of
from .heap_simulator import Buffer, HeapResult, align_up, pack, peak_live
from .pass_base import ModulePass, PassReport, PassResult
from .scheduling import entry_function, nested_operands, type_bytes

FLATTENED = ("xhlo.while", "xhlo.conditional")
SUMMARY_KEYS = ("temp_bytes", "parameter_bytes", "live_out_bytes", "constant_bytes", "total_bytes", "peak_live_bytes", "allocations",
                "kernel_scratch_bytes")


@dataclass
class Value:
    id: int
    name: str
    value: ir.Value
    size: int
    shape: str
    defined: int
    scope: tuple  # the flattened ops (loops, conditionals) the value is defined in, outermost first
    uses: list[tuple[int, tuple]] = field(default_factory=list)  # (time, scope of the user)


@dataclass
class LogicalBuffer:
    name: str
    values: list[Value]
    size: int
    start: int
    end: int
    kind: str  # parameter | constant | maybe-live-out | temp
    parameter: int | None = None
    offset: int = 0


@dataclass
class Scratch:
    """Slab memory one step holds while it runs: `size` bytes at `offset`, live from schedule
    time `start` to `end` (inclusive; the op's time, or the span of the times a shared branch
    runs it at), holding what `holds` says."""

    name: str
    size: int
    start: int
    end: int
    offset: int
    holds: str


@dataclass
class Assignment:
    sequence: list[str]
    values: list[Value]
    buffers: list[LogicalBuffer]
    heap: HeapResult
    heap_candidates: dict[str, int]
    summary: dict[str, int]
    donations: list[str] = field(default_factory=list)  # per donated parameter: which output it holds, or why none
    alignment: int = 1
    op_times: dict = field(default_factory=dict)  # op of a flattened block -> the schedule times it runs at
    scratch: list[Scratch] = field(default_factory=list)

    def time_span(self, op: ir.Operation) -> tuple[int, int]:
        """The schedule times `op` (or the op of the schedule holding it, for an op inside a
        fusion or another opaque region) runs at: (first, last)."""
        while op not in self.op_times:
            parent = op.parent
            if parent is None or parent.name == "builtin.module":
                raise KeyError(f"{op.name} is not in the schedule")
            op = parent
        times = self.op_times[op]
        return min(times), max(times)


def place_scratch(a: Assignment, name: str, size: int, start: int, end: int, holds: str) -> int:
    """Put `size` bytes live over [start, end] in the slab, in the tightest aligned gap the
    temps and scratch live then leave free, else above them (growing the slab); its offset.
    The temps do not move."""
    busy = sorted([(b.offset, b.offset + b.size) for b in a.buffers if b.kind == "temp" and b.size > 0 and b.start <= end and start <= b.end]
                  + [(s.offset, s.offset + s.size) for s in a.scratch if s.start <= end and start <= s.end])
    best, cursor = None, 0
    for low, high in busy:
        gap_start = align_up(cursor, a.alignment)
        if low - gap_start >= size and (best is None or low - gap_start < best[0]):
            best = (low - gap_start, gap_start)
        cursor = max(cursor, high)
    offset = best[1] if best is not None else align_up(cursor, a.alignment)
    a.scratch.append(Scratch(name, size, start, end, offset, holds))
    a.heap.size = max(a.heap.size, offset + size)
    a.summary["temp_bytes"] = a.heap.size
    a.summary["kernel_scratch_bytes"] += size
    a.summary["allocations"] = sum(1 for b in a.buffers if b.kind != "temp") + (1 if a.heap.size else 0)
    a.summary["total_bytes"] = sum(a.summary[k] for k in ("temp_bytes", "parameter_bytes", "live_out_bytes", "constant_bytes"))
    return offset


class UnionFind:
    def __init__(self):
        self.parent: dict[int, int] = {}

    def find(self, x: int) -> int:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


class Analysis:
    def __init__(self, module: ir.Module, share_elementwise: bool = True):
        self.module = module
        self.functions = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
                          for op in module.body.operations if op.operation.name == "func.func"}
        self.values: dict[ir.Value, Value] = {}
        self.sequence: list[str] = []
        self.op_time: dict[ir.Operation, int] = {}
        self.op_times: dict[ir.Operation, list[int]] = {}
        self.pending_uses: list[tuple[ir.Value, int, tuple]] = []
        self.unions = UnionFind()
        self.counters: dict[str, int] = defaultdict(int)
        self.constants: set[int] = set()
        self.parameters: dict[int, int] = {}
        self.in_place: list[tuple[list[ir.Value], ir.Value, int]] = []  # (operands it may reuse, result, time)
        self.share_elementwise = share_elementwise

    def define(self, value: ir.Value, base: str, time: int, scope: tuple) -> Value:
        if value in self.values:  # a computation reached twice (shared branch): same value
            return self.values[value]
        record = Value(len(self.values), base, value, type_bytes(value.type), str(value.type), time, scope)
        self.values[value] = record
        return record

    def op_name(self, op: ir.Operation) -> str:
        base = op.name.removeprefix("xhlo.").removeprefix("func.")
        self.counters[base] += 1
        return base if self.counters[base] == 1 else f"{base}.{self.counters[base] - 1}"

    def alias(self, a: ir.Value, b: ir.Value) -> None:
        if a in self.values and b in self.values:
            self.unions.union(self.values[a].id, self.values[b].id)

    def run_entry(self, func: ir.Operation) -> None:
        block = func.regions[0].blocks[0]
        for k, arg in enumerate(block.arguments):
            record = self.define(arg, f"param.{k}", 0, ())
            self.parameters[record.id] = k
            self.sequence.append(record.name)
        self.times = len(self.sequence)
        self.number_block(block, ())
        self.end = len(self.sequence)
        terminator = list(block.operations)[-1].operation
        self.live_out = {self.values[v].id for v in terminator.operands if v in self.values}
        self.outputs = list(terminator.operands)
        self.arguments = list(block.arguments)
        self.donors = donated_outputs(func)
        self.donations: list[str] = []

    def number_block(self, block: ir.Block, scope: tuple) -> None:
        for op in block.operations:
            self.number_op(op.operation, scope)

    def tick(self, name: str) -> int:
        self.sequence.append(name)
        return len(self.sequence) - 1

    def number_op(self, op: ir.Operation, scope: tuple) -> None:
        name = self.op_name(op)
        inner_scope = scope + (op,)
        first_step = len(self.sequence)
        if op.name == "xhlo.while":
            for region in op.regions:
                block = region.blocks[0]
                for k, arg in enumerate(block.arguments):
                    self.define(arg, f"{name}.arg{k}", len(self.sequence), inner_scope)
                self.number_block(block, inner_scope)
        elif op.name == "xhlo.conditional":
            for callee in self.branches(op):
                if callee in self.functions:
                    block = self.functions[callee].regions[0].blocks[0]
                    for k, arg in enumerate(block.arguments):
                        self.define(arg, f"{callee}.arg{k}", len(self.sequence), inner_scope)
                    self.number_block(block, inner_scope)
        time = self.tick(name)
        self.op_time[op] = time
        self.op_times.setdefault(op, []).append(time)  # a branch shared by two conditionals runs twice
        read_at = first_step if op.name == "xhlo.while" else time  # its init becomes the carried values there
        for value in self.opaque_operands(op):
            self.pending_uses.append((value, read_at, scope))
        for k, result in enumerate(op.results):
            record = self.define(result, name if len(op.results) == 1 else f"{name}#{k}", time, scope)
            if op.name == "xhlo.constant":
                self.constants.add(record.id)
        self.add_aliases(op)

    def branches(self, op: ir.Operation) -> list[str]:
        if "branch_computations" not in op.attributes:
            return []
        return [ir.FlatSymbolRefAttr(a).value for a in ir.ArrayAttr(op.attributes["branch_computations"])]

    def opaque_operands(self, op: ir.Operation) -> list[ir.Value]:
        """Operands of `op` and of ops in its regions, unless those regions are flattened."""
        if op.name in FLATTENED:
            return list(op.operands)
        return nested_operands(op)

    def add_aliases(self, op: ir.Operation) -> None:
        operands, results = list(op.operands), list(op.results)
        if op.name in ("xhlo.bitcast", "xhlo.optimization_barrier"):
            for a, b in zip(operands, results):
                self.alias(a, b)
        elif op.name == "xhlo.get_tuple_element":
            source = operands[0]
            index = ir.IntegerAttr(op.attributes["index"]).value
            if isinstance(source, ir.OpResult) and source.owner.operation.name == "xhlo.tuple":
                self.alias(list(source.owner.operation.operands)[index], results[0])
            else:
                self.alias(source, results[0])
        elif op.name == "xhlo.while":
            for region in op.regions:
                block = region.blocks[0]
                for k, arg in enumerate(block.arguments):
                    self.alias(operands[k], arg)
                    self.alias(results[k], arg)
            body_return = list(op.regions[1].blocks[0].operations)[-1].operation
            for k, value in enumerate(body_return.operands):
                self.alias(results[k], value)
        elif op.name == "xhlo.conditional":
            counts = [int(c) for c in ir.DenseI64ArrayAttr(op.attributes["branch_operand_counts"])]
            position = 1
            for callee, count in zip(self.branches(op), counts):
                if callee not in self.functions:
                    continue
                block = self.functions[callee].regions[0].blocks[0]
                for k, arg in enumerate(block.arguments):
                    self.alias(operands[position + k], arg)
                position += count
                branch_return = list(block.operations)[-1].operation
                for k, value in enumerate(branch_return.operands):
                    self.alias(results[k], value)
        elif (pair := in_place_pair(op)) is not None:
            self.in_place.append(([operands[pair[0]]], results[pair[1]], self.op_time[op]))
        elif op.name == "xhlo.scatter" and len(results) == 1 and operands[0] not in operands[1:]:
            self.in_place.append(([operands[0]], results[0], self.op_time[op]))
        elif self.share_elementwise and kind_of(op) in ELEMENTWISE and len(results) == 1:
            self.in_place.append((operands, results[0], self.op_time[op]))
        elif self.share_elementwise and op.name == "xhlo.fusion":
            for index, result in enumerate(results):
                if readable := elementwise_read_operands(op, index):
                    self.in_place.append((readable, result, self.op_time[op]))

    def use_time(self, value: ir.Value, time: int, user_scope: tuple) -> int:
        defined = self.values[value].scope
        for enclosing in user_scope:
            if enclosing not in defined:
                return max(time, self.op_time[enclosing])  # outermost loop/branch not holding the value
        return time

    def finish(self) -> list[LogicalBuffer]:
        for value, time, scope in self.pending_uses:
            if value in self.values:
                self.values[value].uses.append((self.use_time(value, time, scope), scope))
        self.share_in_place()
        for parameter, output in self.donors.items():
            self.donate(parameter, output)
        buffers = []
        for members in self.groups().values():
            members.sort(key=lambda v: (v.defined, v.id))
            ids = {v.id for v in members}
            start = min(v.defined for v in members)
            end = max(self.last_use(v) for v in members)
            kind, parameter = "temp", None
            if ids & set(self.parameters):
                kind, parameter = "parameter", min(self.parameters[i] for i in ids & set(self.parameters))
                start, end = 0, self.end
            elif ids & self.constants:
                kind, start, end = "constant", 0, self.end
            elif ids & self.live_out:
                kind, end = "maybe-live-out", self.end
            size = max(v.size for v in members)
            buffers.append(LogicalBuffer(members[0].name, members, size, start, end, kind, parameter))
        buffers.sort(key=lambda b: (b.start, b.name))
        return buffers

    def share_in_place(self) -> None:
        """A result takes over an operand's buffer (XLA's CanShareOperandBufferWithUser) when
        the two buffers do not interfere: no value of one is live while a value of the other
        is, but for an op reading a value last and writing another in place of it, this op
        or a later one of the same buffers (a loop body's second in-place update into the
        carried buffer, say). Parameters and constants are never written in place. Values are
        compared, not whole buffers: a loop-carried buffer holds values defined before and
        after the in-place op, and its parameter may still be dead there."""
        members: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
        pinned: set[int] = set()
        for v in self.values.values():
            root = self.unions.find(v.id)
            members[root].append((v.id, v.defined, self.last_use(v)))
            if v.id in self.parameters or v.id in self.constants:
                pinned.add(root)
        in_place = {(self.values[operand].id, self.values[result].id)
                    for candidates, result, _ in self.in_place if result in self.values
                    for operand in candidates if operand in self.values}
        for candidates, result, time in sorted(self.in_place, key=lambda c: c[2]):
            if result not in self.values:
                continue
            for operand in candidates:
                if operand not in self.values or self.values[operand].size != self.values[result].size:
                    continue
                a, b = self.unions.find(self.values[operand].id), self.unions.find(self.values[result].id)
                if a == b or a in pinned or b in pinned or not self.disjoint(members[a], members[b], in_place):
                    continue
                self.unions.union(a, b)
                members[self.unions.find(a)] = members.pop(a) + members.pop(b)
                break

    @staticmethod
    def disjoint(first: list[tuple[int, int, int]], second: list[tuple[int, int, int]], in_place: set[tuple[int, int]]) -> bool:
        """Whether no value (id, defined, last use) of `first` is live while one of `second`
        is; a value read last by the op that defines the other in place of it is not."""
        def apart(earlier, later) -> bool:
            return earlier[2] < later[1] or (earlier[2] == later[1] and (earlier[0], later[0]) in in_place)
        return all(apart(x, y) or apart(y, x) for x in first for y in second)

    def donate(self, parameter: int, output: int) -> None:
        """Output `output` joins donated parameter `parameter`'s buffer (XLA's input/output
        alias) when that is safe: its buffer holds no other parameter or constant, and nothing
        reads the parameter after the output's buffer is first written, except the op writing
        it, reading the parameter elementwise (in place). Otherwise it keeps a buffer of its own."""
        value, donor = self.outputs[output], self.arguments[parameter]
        if value == donor:
            self.donations.append(f"parameter {parameter} is output {output} itself")
            return
        groups = self.groups()
        root, donor_root = self.unions.find(self.values[value].id), self.unions.find(self.values[donor].id)
        members = groups[root]
        if any(v.id in self.parameters or v.id in self.constants for v in members):
            self.donations.append(f"parameter {parameter} not donated to output {output}: the output is another parameter or a constant")
            return
        first_write = min(v.defined for v in members)
        last_read = max(self.last_use(v) for v in groups[donor_root])
        in_place = any(time == first_write and self.unions.find(self.values[result].id) == root
                       and any(c in self.values and self.unions.find(self.values[c].id) == donor_root for c in candidates)
                       for candidates, result, time in self.in_place)
        if last_read > first_write:
            self.donations.append(f"parameter {parameter} not donated to output {output}: "
                                  f"read at step {last_read}, after the output is first written at step {first_write}")
            return
        if last_read == first_write and not in_place:
            self.donations.append(f"parameter {parameter} not donated to output {output}: "
                                  f"the op writing the output reads it other than elementwise")
            return
        self.unions.union(root, donor_root)
        self.donations.append(f"parameter {parameter} holds output {output}")

    def last_use(self, v: Value) -> int:
        return max([v.defined] + [t for t, _ in v.uses])

    def groups(self) -> dict[int, list[Value]]:
        found: dict[int, list[Value]] = defaultdict(list)
        for v in self.values.values():
            found[self.unions.find(v.id)].append(v)
        return found


def donated_outputs(func: ir.Operation) -> dict[int, int]:
    """parameter -> the entry output it is donated to: `tf.aliasing_output` names the output;
    a `jax.buffer_donor` takes the first output of its type no other parameter took."""
    if "arg_attrs" not in func.attributes:
        return {}
    block = func.regions[0].blocks[0]
    output_types = [str(v.type) for v in list(block.operations)[-1].operation.operands]
    donors, taken = {}, set()
    for index, attributes in enumerate(ir.ArrayAttr(func.attributes["arg_attrs"])):
        attributes = ir.DictAttr(attributes)
        if "tf.aliasing_output" in attributes:
            output = ir.IntegerAttr(attributes["tf.aliasing_output"]).value
            if output < len(output_types) and output_types[output] == str(block.arguments[index].type):
                donors[index] = output
                taken.add(output)
    for index, attributes in enumerate(ir.ArrayAttr(func.attributes["arg_attrs"])):
        if "jax.buffer_donor" in ir.DictAttr(attributes) and index not in donors:
            output = next((k for k, t in enumerate(output_types) if k not in taken and t == str(block.arguments[index].type)), None)
            if output is not None:
                donors[index] = output
                taken.add(output)
    return donors


def colocate_in_live_out(buffers: list[LogicalBuffer]) -> list[LogicalBuffer]:
    """Temps that die before a maybe-live-out buffer is defined live in its allocation, as XLA
    assigns a buffer to an existing allocation it does not interfere with before it opens a
    new one: the output's memory serves earlier values for free."""
    temps = sorted((b for b in buffers if b.kind == "temp" and b.size > 0), key=lambda b: (-b.size, b.start))
    placed: set[int] = set()
    for host in (b for b in buffers if b.kind == "maybe-live-out"):
        occupied = [(host.start, host.end)]
        for temp in temps:
            if id(temp) in placed or temp.size > host.size:
                continue
            if any(temp.start <= end and start <= temp.end for start, end in occupied):
                continue
            occupied.append((temp.start, temp.end))
            host.values.extend(temp.values)
            placed.add(id(temp))
    return [b for b in buffers if id(b) not in placed]


def analyze(module: ir.Module, alignment: int = 1, share_elementwise: bool = True) -> Assignment:
    with module.context:
        analysis = Analysis(module, share_elementwise)
        entry = entry_function(module)
        if entry is None:
            return Assignment([], [], [], HeapResult("spatial"), {}, {k: 0 for k in SUMMARY_KEYS}, alignment=alignment)
        analysis.run_entry(entry)
        buffers = colocate_in_live_out(analysis.finish())
    temps = [b for b in buffers if b.kind == "temp" and b.size > 0]
    slab = [Buffer(b.name, b.size, b.start, b.end) for b in temps]
    heap, candidates = pack(slab, alignment)
    for b in temps:
        b.offset = heap.offsets[b.name]
    by_kind = defaultdict(int)
    allocations = 1 if heap.size else 0
    for b in buffers:
        if b.kind != "temp":
            by_kind[b.kind] += b.size
            allocations += 1
    summary = {
        "temp_bytes": heap.size,
        "parameter_bytes": by_kind["parameter"],
        "live_out_bytes": by_kind["maybe-live-out"],
        "constant_bytes": by_kind["constant"],
        "peak_live_bytes": peak_live(slab),
        "allocations": allocations,
        "kernel_scratch_bytes": 0,
    }
    summary["total_bytes"] = summary["temp_bytes"] + summary["parameter_bytes"] + summary["live_out_bytes"] + summary["constant_bytes"]
    return Assignment(analysis.sequence, list(analysis.values.values()), buffers, heap, candidates, summary, analysis.donations,
                      alignment, analysis.op_times)


def memory_summary(module: ir.Module) -> dict[str, int]:
    """Bytes by kind for the module in its current order, as the pass alone assigns them (no
    backend's scratch): temp (the packed slab), parameter, live_out, constant, total, peak (the
    most temp bytes live at once), the allocation count, kernel scratch (0: a backend places it)."""
    s = analyze(module).summary
    return {"temp": s["temp_bytes"], "parameter": s["parameter_bytes"], "live_out": s["live_out_bytes"],
            "constant": s["constant_bytes"], "total": s["total_bytes"], "peak": s["peak_live_bytes"],
            "allocations": s["allocations"], "kernel_scratch": s["kernel_scratch_bytes"]}


def summary_attr(summary: dict[str, int]) -> ir.Attribute:
    i64 = ir.IntegerType.get_signless(64)
    return ir.DictAttr.get({k: ir.IntegerAttr.get(i64, summary[k]) for k in SUMMARY_KEYS})


# ----- dumps ------------------------------------------------------------------------------

def human(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.2f}{unit}"
    return f"{size}B"


def allocations(a: Assignment) -> list[tuple[str, int, list[tuple[Value, int]]]]:
    """(description, size, [(value, offset)]) per allocation, largest first, the temp slab included."""
    rows = []
    for b in a.buffers:
        if b.kind == "temp":
            continue
        if b.kind == "parameter":
            what = f"parameter {b.parameter}, shape |{b.values[0].shape}|"
        elif b.kind == "constant":
            what = "constant"
        else:
            what = f"output shape is |{b.values[0].shape}|, maybe-live-out"
        rows.append((what, b.size, [(v, 0) for v in b.values]))
    if a.heap.size:
        slab = [(v, b.offset) for b in a.buffers if b.kind == "temp" and b.size > 0 for v in b.values]
        slab += [(s, s.offset) for s in a.scratch]
        rows.append(("preallocated-temp", a.heap.size, slab))
    rows.sort(key=lambda r: -r[1])
    return rows


def buffer_assignment_text(a: Assignment) -> str:
    lines = ["BufferAssignment:"]
    for k, (what, size, values) in enumerate(allocations(a)):
        lines.append(f"allocation {k}: size {size}, {what}:")
        for v, offset in values:
            if isinstance(v, Scratch):
                lines.append(f" scratch: <{v.name} @{v.start}-{v.end}> (size={v.size},offset={offset}): {v.holds}")
            else:
                lines.append(f" value: <{v.id} {v.name} @0> (size={v.size},offset={offset}): {v.shape}")
    s = a.summary
    lines += ["", "Total bytes used: {}".format(s["total_bytes"]),
              f"Temp slab: {s['temp_bytes']} bytes ({a.heap.order} order chosen; candidates: "
              + ", ".join(f"{k}={n}" for k, n in a.heap_candidates.items()) + f"; peak live {s['peak_live_bytes']}; "
              f"alignment {a.alignment})",
              f"Scratch in the slab (live only while its step runs): {len(a.scratch)} interval(s), {s['kernel_scratch_bytes']} bytes", ""]
    lines += [f"Donation: {d}" for d in a.donations] + ([""] if a.donations else [])
    return "\n".join(lines)


def memory_usage_text(a: Assignment) -> str:
    rows = allocations(a)
    total = sum(size for _, size, _ in rows)
    lines = ["Memory Space: default (color=0)", f"Total bytes: {total} ({human(total)})"]
    for what, size, values in rows:
        lines += ["  cumulative_size;       size;       offset; used_by_n_values; shapes_list",
                  "  ------------------------------------------------------------"]
        by_offset: dict[int, list[Value]] = defaultdict(list)
        for v, offset in values:
            by_offset[offset].append(v)
        cumulative = 0
        for offset in sorted(by_offset, reverse=True):
            group = by_offset[offset]
            chunk = max(v.size for v in group)
            cumulative += chunk
            shapes = defaultdict(int)
            for v in group:
                shapes[f"scratch {v.name}" if isinstance(v, Scratch) else v.shape] += 1
            shape_text = ", ".join(f"{n}×{s}" if n > 1 else s for s, n in shapes.items())
            lines.append(f"  {human(cumulative):>10}({100 * cumulative // max(size, 1):3d}%); {human(chunk):>10}; "
                         f"{offset:>12}; {len(group):>16}; {shape_text}   [{what}]")
        lines.append("")
    return "\n".join(lines)


def live_range_text(a: Assignment) -> str:
    lines = [f"HloLiveRange (max {len(a.sequence)}):", "  InstructionSequence:"]
    lines += [f"    {k}:{name}" for k, name in enumerate(a.sequence)]
    lines.append("  BufferLiveRange:")
    for b in a.buffers:
        for v in b.values:
            end = max([v.defined] + [t for t, _ in v.uses])
            if b.kind != "temp":
                end = b.end
            lines.append(f"    {v.name}{{}}:{v.defined}-{end}")
    lines += [f"    {s.name}{{scratch}}:{s.start}-{s.end}" for s in a.scratch]
    peak_time, peak = 0, -1
    temps = [b for b in a.buffers if b.kind == "temp" and b.size > 0] + a.scratch
    for t in range(len(a.sequence)):
        live = sum(b.size for b in temps if b.start <= t <= b.end)
        if live > peak:
            peak_time, peak = t, live
    lines.append(f"  Live ranges at {peak_time} (peak temp bytes {max(peak, 0)}):")
    for b in temps:
        if b.start <= peak_time <= b.end:
            lines.append(f"    {b.name}: {b.size} bytes")
    return "\n".join(lines) + "\n"


def heap_svg(a: Assignment) -> str:
    temps = [b for b in a.buffers if b.kind == "temp" and b.size > 0] + a.scratch
    steps = max(len(a.sequence), 1)
    height = max(a.heap.size, 1)
    width_px, height_px, margin = 800, 500, 40
    sx, sy = width_px / steps, height_px / height
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width_px + 2 * margin}" height="{height_px + 2 * margin}" font-family="monospace" font-size="9">',
           f'<text x="{margin}" y="15">temp slab {a.heap.size} bytes ({a.heap.order} order): offset (up) vs schedule time (right)</text>',
           f'<rect x="{margin}" y="{margin}" width="{width_px}" height="{height_px}" fill="none" stroke="black"/>']
    palette = ["#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5"]
    for k, b in enumerate(temps):
        x = margin + b.start * sx
        w = max((b.end - b.start + 1) * sx, 1)
        y = margin + height_px - (b.offset + b.size) * sy
        h = max(b.size * sy, 1)
        out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{palette[k % len(palette)]}" stroke="black"><title>{b.name}: {b.size} bytes at {b.offset}, time {b.start}-{b.end}</title></rect>')
        out.append(f'<text x="{x + 2:.1f}" y="{y + min(h, 12) - 2:.1f}">{b.name}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class BufferAssignmentPass(ModulePass):
    """Assigns buffers (parameters, constants, live-outs, one packed temp slab); writes a summary."""

    name: ClassVar[str] = "xhlo-buffer-assignment"
    summary: ClassVar[str] = "buffer assignment: aliases, live ranges, one best-fit packed temp slab"
    alignment: int = 1  # byte alignment of offsets in the temp slab
    share_elementwise: bool = True  # an elementwise op may write over a same-size operand dying there

    def run(self, module: ir.Module) -> PassResult:
        assignment = analyze(module, self.alignment, self.share_elementwise)
        return PassResult(write_summary(module, assignment.summary), BufferAssignmentReport(assignment))


def write_summary(module: ir.Module, summary: dict[str, int]) -> bool:
    """Write the summary attribute; whether it was new or different."""
    with module.context:
        attr = summary_attr(summary)
        attributes = module.operation.attributes
        if "xhlo.buffer_assignment" in attributes and str(attributes["xhlo.buffer_assignment"]) == str(attr):
            return False
        attributes["xhlo.buffer_assignment"] = attr
    return True


@dataclass(frozen=True)
class BufferAssignmentReport(PassReport):
    """The assignment one run made, dumped as XLA's buffer-assignment files."""

    assignment: Assignment

    def dump_files(self) -> dict[str, str]:
        a = self.assignment
        return {"buffer-assignment.txt": buffer_assignment_text(a), "memory-usage-report.txt": memory_usage_text(a),
                "live-range.txt": live_range_text(a), "heap.svg": heap_svg(a)}
