"""Each thunk of an executable with what the report and the profile say about it: the op it
runs (matched in the optimized module), its bytes in and out, its flops, the cost model's
estimate of its time; and the values flowing between thunks, read off the slices they write
and read.

Thunks carry names, not ops: the thunk emitter names each after its op (a fusion's unique
name, else the op's kind) and emits them in schedule order, so a thunk is matched to the next
op of its block with its name. An op may emit several thunks (an output fusion: the GEMM and
its epilogue; a convolution: im2col and the GEMM); their flops are the op's, the library
call taking its share first.
"""

from dataclasses import dataclass

from mlirxla.ir_queries import entry_function, function_name, module_functions
from mlirxla.mlir import ir
from mlirxla.runtime import thunks as thunk_kinds
from mlirxla.transforms.cost_analysis import kernel_cost
from mlirxla.transforms.cost_model import byte_size, model_for
from mlirxla.transforms.fusion_legality import NOT_KERNELS, kind_of

CATEGORIES = {"kernel": "kernel", "sliced_kernel": "kernel", "gemm": "library", "host": "library", "function": "library",
              "collective": "library", "copy": "copy", "parallel_copy": "copy", "while": "control", "conditional": "control"}
NO_THUNK = NOT_KERNELS | {"return"}


@dataclass
class ThunkFacts:
    index: int  # in the sequence flattened depth first (loops' and branches' thunks after their owner)
    thunk: object
    op: object | None  # the ir.Operation it runs, when matched
    parent: int | None = None  # the loop or conditional holding it
    region: str = ""  # where in the parent: condition, body, branch N
    flops: float = 0.0
    estimate_s: float | None = None  # the cost model's roofline; None for loops and conditionals
    live_temp_bytes: int | None = None  # the temp bytes buffer assignment keeps live at its op

    @property
    def kind(self) -> str:
        return self.thunk.kind

    @property
    def name(self) -> str:
        return self.thunk.name

    @property
    def category(self) -> str:
        return CATEGORIES.get(self.kind, "library")

    @property
    def routine(self) -> str:
        """What it calls: the kernel's symbol, the BLAS routine, the host call."""
        thunk = self.thunk
        if isinstance(thunk, thunk_kinds.GemmThunk):
            batch = f"{thunk.batch}x" if thunk.batch > 1 else ""
            return f"BLAS {thunk.element} gemm {batch}{thunk.m}x{thunk.n}x{thunk.k}"
        for attribute in ("symbol", "call", "function_name"):
            if hasattr(thunk, attribute):
                return getattr(thunk, attribute)
        return "memmove" if self.category == "copy" else ""

    @property
    def bytes_in(self) -> int:
        return 0 if self.category == "control" else sum(s.size for s in dict.fromkeys(self.thunk.reads))

    @property
    def bytes_out(self) -> int:
        return 0 if self.category == "control" else sum(s.size for s in dict.fromkeys(self.thunk.writes))

    @property
    def shape(self) -> str:
        if self.op is None:
            return ""
        return ", ".join(type_text(result.type) for result in self.op.results)


@dataclass(frozen=True)
class Flow:
    """Bytes one thunk writes and another reads (`producer`, `consumer`: thunk indices, or
    `parameter N`, `constant N`, `output N` for the program's edges)."""

    producer: int | str
    consumer: int | str
    size: int
    label: str


def type_text(value_type) -> str:
    if isinstance(value_type, ir.RankedTensorType):
        shaped = ir.RankedTensorType(value_type)
        return f"{shaped.element_type}[{','.join(map(str, shaped.shape))}]"
    return str(value_type)


def name_of(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["name"]).value if "name" in op.attributes else kind_of(op)


def names_thunk(op: ir.Operation, thunk) -> bool:
    """Whether `thunk` is named after `op`: its name, or the name and a suffix of its own
    (`conv.im2col`; `fusion.3` is another fusion)."""
    name = name_of(op)
    if thunk.name == name:
        return True
    suffix = thunk.name[len(name) + 1:] if thunk.name.startswith(name + ".") else ""
    return bool(suffix) and not suffix.isdigit()


def emits_several(op: ir.Operation) -> bool:
    fusion_kind = ir.StringAttr(op.attributes["kind"]).value if op.name == "xhlo.fusion" and "kind" in op.attributes else ""
    return kind_of(op) == "convolution" or fusion_kind == "output"


def thunk_ops(thunks: list, ops: list, functions: dict) -> dict[int, ir.Operation]:
    """id(thunk) -> the op it runs, for `thunks` and the thunks inside them, matched in order
    against `ops` (the block they were emitted from)."""
    candidates = [op for op in ops if op.name != "func.return" and kind_of(op) not in NO_THUNK]
    found: dict[int, ir.Operation] = {}
    position, previous = 0, None
    for thunk in thunks:
        if previous is not None and emits_several(previous) and names_thunk(previous, thunk):
            found[id(thunk)] = previous
            continue
        previous = next((op for op in candidates[position:] if names_thunk(op, thunk)), None)
        if previous is None:
            continue
        found[id(thunk)] = previous
        position = candidates.index(previous, position) + 1
        found.update(nested_thunk_ops(thunk, previous, functions))
    return found


def nested_thunk_ops(thunk, op: ir.Operation, functions: dict) -> dict[int, ir.Operation]:
    if isinstance(thunk, thunk_kinds.WhileThunk) and len(op.regions) == 2:
        blocks = [list(region.blocks[0].operations) for region in op.regions]
        return thunk_ops(thunk.condition, blocks[0], functions) | thunk_ops(thunk.body, blocks[1], functions)
    if isinstance(thunk, thunk_kinds.ConditionalThunk) and "branch_computations" in op.attributes:
        found = {}
        for branch, symbol in zip(thunk.branches, ir.ArrayAttr(op.attributes["branch_computations"])):
            function = functions.get(ir.FlatSymbolRefAttr(symbol).value)
            if function is not None:
                found |= thunk_ops(branch, list(function.regions[0].blocks[0].operations), functions)
        return found
    return {}


def flattened(thunks: list, parent: int | None = None, region: str = "", into: list | None = None) -> list[ThunkFacts]:
    """ThunkFacts (without the op's figures yet) for every thunk, depth first."""
    into = [] if into is None else into
    for thunk in thunks:
        facts = ThunkFacts(len(into), thunk, None, parent, region)
        into.append(facts)
        if isinstance(thunk, thunk_kinds.WhileThunk):
            flattened(thunk.condition, facts.index, "condition", into)
            flattened(thunk.body, facts.index, "body", into)
        elif isinstance(thunk, thunk_kinds.ConditionalThunk):
            for number, branch in enumerate(thunk.branches):
                flattened(branch, facts.index, f"branch {number}", into)
    return into


def library_flops(thunk) -> float:
    if isinstance(thunk, thunk_kinds.GemmThunk):
        return 2.0 * thunk.m * thunk.n * thunk.k * thunk.batch
    return 0.0


def share_flops(facts: list[ThunkFacts]) -> None:
    """Each thunk's flops: a GEMM's own; the rest of its op's (by XLA's cost analysis) to the
    op's first other thunk, so that an op's thunks add up to the op."""
    by_op: dict[int, list[ThunkFacts]] = {}
    for fact in facts:
        fact.flops = library_flops(fact.thunk)
        if fact.op is not None and fact.category != "control":
            by_op.setdefault(id(fact.op), []).append(fact)
    for group in by_op.values():
        cost = kernel_cost(group[0].op)
        remainder = cost.flops + cost.transcendentals - sum(f.flops for f in group)
        others = [f for f in group if f.flops == 0.0]
        if others:
            others[0].flops = max(remainder, 0.0)


def entry_and_functions(module: ir.Module) -> tuple[ir.Operation | None, dict]:
    return entry_function(module), {function_name(function): function for function in module_functions(module)}


def live_temp_by_op(assignment) -> dict:
    """ir.Value of an op's first result -> the temp bytes live at that op's step."""
    temps = [b for b in assignment.buffers if b.kind == "temp" and b.size > 0]
    live = {}
    for value in assignment.values:
        live[value.value] = sum(b.size for b in temps if b.start <= value.defined <= b.end)
    return live


def thunk_facts(plan, module: ir.Module | None = None, assignment=None) -> list[ThunkFacts]:
    """The facts of every thunk of `plan`; with the optimized `module`, matched to its ops;
    with buffer assignment's `assignment`, the temp bytes live at each."""
    facts = flattened(plan.thunks)
    entry, functions = entry_and_functions(module) if module is not None else (None, {})
    if entry is not None:
        ops = thunk_ops(plan.thunks, list(entry.regions[0].blocks[0].operations), functions)
        for fact in facts:
            fact.op = ops.get(id(fact.thunk))
    return with_figures(facts, assignment)


def with_figures(facts: list[ThunkFacts], assignment=None) -> list[ThunkFacts]:
    """`facts` with their flops, the cost model's estimate and the live temp bytes filled in."""
    share_flops(facts)
    model = model_for("cpu")
    live = live_temp_by_op(assignment) if assignment is not None else {}
    for fact in facts:
        if fact.category != "control":
            fact.estimate_s = model.kernel_time(fact.bytes_in + fact.bytes_out, fact.flops)
        if fact.op is not None and fact.op.results:
            fact.live_temp_bytes = live.get(fact.op.results[0])
    return facts


def overlaps(a, b) -> bool:
    return a.allocation == b.allocation and a.offset < b.offset + b.size and b.offset < a.offset + a.size


def written_label(fact: ThunkFacts, at) -> str:
    """The value `fact` writes at `at`: its op's result of that size ("" when none is)."""
    if fact.op is not None:
        for result in fact.op.results:
            shaped = result.type
            if isinstance(shaped, ir.RankedTensorType) and byte_size(shaped) == at.size:
                return type_text(shaped)
    return ""


def source_of(plan, at) -> tuple[str, str]:
    """(node, label) of a slice no thunk wrote before it was read: a parameter or a constant."""
    kind = plan.allocation_kinds[at.allocation]
    if kind == "parameter" and at.allocation < len(plan.parameters):
        return f"parameter {at.allocation}", plan.parameters[at.allocation].text()
    return f"{kind} {at.allocation}", ""


def flows(plan, facts: list[ThunkFacts]) -> list[Flow]:
    """Who reads what whom wrote, in execution order (a loop's carried values feed its body
    from before the loop, not around it); and where the outputs come from."""
    leaves = [f for f in facts if f.category != "control"]
    writes: list[tuple[object, ThunkFacts]] = []
    found: dict[tuple, Flow] = {}

    def add(producer, consumer, size: int, label: str) -> None:
        key = (producer, consumer)
        earlier = found.get(key)
        found[key] = Flow(producer, consumer, size + (earlier.size if earlier else 0), earlier.label if earlier else label)

    def last_writer(at):
        return next((writer for written, writer in reversed(writes) if overlaps(written, at)), None)

    for fact in leaves:
        for at in dict.fromkeys(fact.thunk.reads):
            writer = last_writer(at)
            if writer is not None:
                add(writer.index, fact.index, at.size, written_label(writer, at))
            else:
                node, label = source_of(plan, at)
                add(node, fact.index, at.size, label)
        writes.extend((at, fact) for at in fact.thunk.writes)
    for number, (at, spec) in enumerate(plan.outputs):
        writer = last_writer(at)
        producer = writer.index if writer is not None else source_of(plan, at)[0]
        add(producer, f"output {number}", at.size, spec.text())
    return list(found.values())
