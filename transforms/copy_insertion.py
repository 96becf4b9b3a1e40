"""xhlo-copy-insertion: add the copies buffer assignment needs for correctness (XLA's CopyInsertion).

Buffer assignment lets an in-place op write its result into its operand's buffer, a while
loop's carried values share one buffer across iterations, and an entry output may share a
donated parameter's buffer. Where that sharing would clobber a value still needed, or a
buffer that is read-only, a copy gives the writer a fresh buffer:
- in-place ops (`dynamic_update_slice` operand 0, `scatter` inputs) whose operand is a
  parameter or constant (read-only buffers), or has another use (it stays live); a dynamic
  slice fused with the update that reads the very window it writes is no such use (XLA's
  rule: jax's `x.at[i].set(f(x[i]))` in a loop updates the row in place); for a
  scatter, which no fusion takes in, only a use that may run after it (one the scatter
  depends on has read the buffer already: a permutation loop's swap reads both rows, then
  scatters them back);
- while-loop init values that are constants or parameters, that have another use the loop
  does not depend on (live after the loop), or that are passed twice, unless the body passes the value through unchanged
  (the loop never writes that buffer, so it may stay the parameter's); a body result
  returned twice, that is a constant, or that comes from outside the loop (CSE shares a loop
  invariant with the enclosing computation); a body result whose definition could overwrite the
  carried value while the body still reads it (`overwrites_live_parameter`: a loop fusion
  reading carried values elementwise writes its results over them, one result or several,
  as jax's binary search moves both bounds in one fusion); each value
  seen through the bitcasts and optimization barriers that forward its buffer;
- conditional branch results that are constants, branch parameters or returned twice, also
  seen through bitcasts and optimization barriers (the branches' results share the
  conditional's result buffers);
- entry results that are parameters or constants, or a value returned twice, also seen
  through bitcasts (distinct output buffers, XLA's AddSpecialCaseCopies); a donated
  parameter returned as its own output needs none.
Donated parameters (`tf.aliasing_output` / `jax.buffer_donor`) get no copy, unlike XLA's
AddCopiesForAliasedInputOutputs: buffer assignment gives the output the parameter's buffer
only when nothing reads the parameter afterwards, and a fresh buffer otherwise. A fresh
allocation costs less than copying the parameter on every call.
Each copy keeps its operand's layout. The pass reports `copy-insertion.txt`, one line per
copy with its reason. Changed: any copy inserted.
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.mlir import ir

from .fusion_legality import ELEMENTWISE, ancestor_in_block, elementwise_read_operands, in_place_pair, kind_of, reachable
from .layout_assignment import entry_functions, insert_copy, is_tensor, layout_of
from .erasure import live_ops
from .pass_base import ModulePass, PassResult, TextReport, rendering_reports

DONATION_ATTRS = ("tf.aliasing_output", "jax.buffer_donor")


def is_carried_value_copy(op: ir.Operation, terminator: ir.Operation) -> bool:
    """A copy in a while body whose result only the body's return uses: it writes a carried
    value's buffer, so it must run after every read of the carried values. The thunk emitter
    runs these last, as one parallel copy (carried values may swap), and the schedule keeps
    them last so that buffer assignment's live ranges follow the same order."""
    return (kind_of(op) == "copy" and op.results[0] in set(terminator.operands)
            and all(use.owner == terminator for use in op.results[0].uses))


# ops whose results are their operands' buffers (buffer assignment aliases them)
BUFFER_FORWARDING = ("xhlo.bitcast", "xhlo.optimization_barrier")


def buffer_chain(value: ir.Value) -> list[ir.Value]:
    """`value`, then each value whose buffer it is, back to the one that owns the buffer: a
    bitcast's or an optimization barrier's result is its operand's buffer (jax's checkpointed
    while loop reads its parameters through a barrier, and the loop wrote the caller's array)."""
    chain = [value]
    while isinstance(value, ir.OpResult) and value.owner.name in BUFFER_FORWARDING:
        value = value.owner.operands[ir.OpResult(value).result_number]
        chain.append(value)
    return chain


def is_parameter(value: ir.Value) -> bool:
    value = buffer_chain(value)[-1]
    return isinstance(value.owner, ir.Block) and value.owner.owner is not None and value.owner.owner.operation.name == "func.func"


def is_constant(value: ir.Value) -> bool:
    value = buffer_chain(value)[-1]
    return not isinstance(value.owner, ir.Block) and value.owner.name == "xhlo.constant"


def defined_outside(value: ir.Value, block: ir.Block) -> bool:
    """Whether `value` comes from outside `block` (a loop body reading a value of the
    enclosing computation, as CSE or a hoisted loop invariant leave them): its buffer is not
    the loop's."""
    if isinstance(value.owner, ir.Block):
        return value.owner != block
    return ancestor_in_block(value.owner, block) is None


def other_uses(value: ir.Value, op: ir.Operation, ordered: bool = False, exempt: tuple = ()) -> int:
    """The uses of `value`'s buffer other than `op`'s and the `exempt` readers': of the value
    and of the values whose buffer it is, the forwarding ops between them left out. With
    `ordered`, the uses `op` depends on (through the ops of its block) are left out too: they
    read the buffer before `op` can write it (XLA's copy insertion orders readers before an
    in-place writer the same way). Only for writers no fusion takes in (a scatter, a loop): a
    fused dynamic-update-slice may read its operand in the same kernel that writes it."""
    chain = buffer_chain(value)
    skipped = [op] + [link.owner for link in chain[:-1]] + list(exempt)
    return sum(1 for link in chain for use in link.uses
               if all(use.owner != s for s in skipped) and not (ordered and runs_before(use.owner, op)))


def same_window_reads(update: ir.Operation) -> list[ir.Operation]:
    """The dynamic slices in `update`'s fusion that read the window a dynamic-update-slice
    writes: its operand at its start indices, the update's shape. XLA updates such a fusion's
    operand in place (CanEmitFusedDynamicUpdateSliceInPlace): each element of the window is
    read before it is written, and the kernel's bufferization copies the window where the
    update reads it other than elementwise (a reversed row, a row minus its maximum)."""
    if update.operation.parent.name != "xhlo.fusion":
        return []
    operand, starts = update.operands[0], list(update.operands[2:])
    sizes = list(ir.RankedTensorType(update.operands[1].type).shape)
    return [use.owner for use in operand.uses
            if use.owner.name == "xhlo.dynamic_slice" and list(use.owner.operands[1:]) == starts
            and list(ir.RankedTensorType(use.owner.results[0].type).shape) == sizes]


def runs_before(user: ir.Operation, op: ir.Operation) -> bool:
    """Whether `op` depends on `user` (or on the op of `op`'s block that holds it)."""
    holder = ancestor_in_block(user, op.operation.block)
    return holder is not None and holder != op.operation and reachable(holder, op.operation)


def is_donated(func, index: int) -> bool:
    if "arg_attrs" not in func.attributes:
        return False
    dicts = ir.ArrayAttr(func.attributes["arg_attrs"])
    if index >= len(dicts):
        return False
    d = ir.DictAttr(dicts[index])
    return any(name in d for name in DONATION_ATTRS)


def describe(value: ir.Value) -> str:
    if is_parameter(value):
        return f"parameter {ir.BlockArgument(buffer_chain(value)[-1]).arg_number}"
    if isinstance(value.owner, ir.Block):
        return f"region argument {ir.BlockArgument(value).arg_number}"
    return value.owner.name


def passes_through(loop: ir.Operation, index: int) -> bool:
    """Whether the while body returns its carried value `index` unchanged."""
    body = loop.regions[1].blocks[0]
    terminator = body.operations[len(body.operations) - 1].operation
    return terminator.operands[index] == body.arguments[index]


def overwrites_live_parameter(body: ir.Block, index: int) -> bool:
    """Whether writing the body's result `index` into the carried buffer (which holds the body
    parameter `index`) could clobber the parameter before its last read: the result is
    another parameter, the parameter is returned in another position (the copies that end the
    body read it after every definition), or some reader of the parameter is not ordered before the result's
    definition by data dependence (any schedule may then run it later), or the definition
    itself reads the parameter other than elementwise in place."""
    terminator = body.operations[len(body.operations) - 1].operation
    result, parameter = terminator.operands[index], body.arguments[index]
    if isinstance(result.owner, ir.Block):
        return True
    aliases = forwarded_buffers(parameter)
    if any(value in aliases for position, value in enumerate(terminator.operands) if position != index):
        return True  # the parameter moves to another carried buffer, read by the copies that end the body
    definer = result.owner.operation
    reads = [(ancestor_in_block(use.owner, body), alias) for alias in aliases for use in alias.uses
             if use.owner.name not in BUFFER_FORWARDING]
    for reader, alias in reads:
        if reader == terminator:
            continue
        if reader == definer:
            if not reads_in_place(definer, alias):
                return True
        elif not reachable(reader, definer):
            return True
    return False


def forwarded_buffers(value: ir.Value) -> list[ir.Value]:
    """`value` and every value whose buffer it is through bitcasts and optimization barriers
    (the reverse of `buffer_chain`): a read of any of them reads `value`'s buffer. jax's
    checkpointed scan body reads its carried values through a barrier, and output fusion may
    move such a read after the op that writes the next iteration's value."""
    found, work = [], [value]
    while work:
        current = work.pop()
        if current in found:
            continue
        found.append(current)
        for use in current.uses:
            if use.owner.name == "xhlo.bitcast":
                work.append(use.owner.results[0])
            elif use.owner.name == "xhlo.optimization_barrier":
                work.append(use.owner.results[use.operand_number])
    return found


def reads_in_place(op: ir.Operation, value: ir.Value) -> bool:
    """Whether `op` reads `value` only elementwise at the index it writes, or is the
    `dynamic_update_slice` (or a fusion rooted in one) or the scatter updating it (so it may
    write its result over it)."""
    operands = list(op.operands)
    if (pair := in_place_pair(op)) is not None:
        return operands[pair[0]] == value and operands.count(value) == 1
    if op.name == "xhlo.scatter":
        return value in operands[:(len(operands) - 1) // 2] and operands.count(value) == 1
    if kind_of(op) in ELEMENTWISE:
        return len(op.results) == 1 and op.results[0].type == value.type
    return op.name == "xhlo.fusion" and any(value in elementwise_read_operands(op, index, positional=True)
                                            for index in range(len(op.results)))


@dataclass(frozen=True)
class CopyInsertionPass(ModulePass):
    """Inserts copies for in-place ops, while loops, entry outputs and donated parameters."""

    name: ClassVar[str] = "xhlo-copy-insertion"
    summary: ClassVar[str] = "copy insertion: copies that keep in-place updates, loops and outputs correct"

    def run(self, module: ir.Module) -> PassResult:
        inserter = CopyInserter()
        entries = {ir.StringAttr(f.attributes["sym_name"]).value for f in entry_functions(module)}
        for func in module.body.operations:
            if func.operation.name != "func.func":
                continue
            fname = ir.StringAttr(func.attributes["sym_name"]).value
            block = func.regions[0].blocks[0]
            inserter.visit_block(block, fname)
            if fname in entries:
                inserter.entry(func, block, fname)
        if not rendering_reports():
            return PassResult(bool(inserter.records))
        lines = inserter.render(module)
        return PassResult(bool(inserter.records), TextReport({"copy-insertion.txt": "\n".join(lines) + ("\n" if lines else "")}))


class CopyInserter:
    """One run of copy insertion: the copies it made, each with its function and reason."""

    def __init__(self):
        self.records: list[tuple[ir.Value, str, str]] = []  # (copy, function name, why)

    def _copy(self, op: ir.Operation, index: int, why: str, fname: str) -> None:
        value = op.operands[index]
        copy = insert_copy(value, layout_of(value) if is_tensor(value) else None, op)
        op.operands[index] = copy
        self.records.append((copy, fname, f"{describe(value)} -> {op.name} operand {index}: {why}"))

    def visit_block(self, block: ir.Block, fname: str) -> None:
        for op in live_ops(block.operations):
            for region in op.regions:
                for inner in region.blocks:
                    self.visit_block(inner, fname)
            if op.name == "xhlo.dynamic_update_slice":
                self._in_place(op, [0], fname)
            elif op.name == "xhlo.scatter":
                count = (len(op.operands) - 1) // 2
                self._in_place(op, list(range(count)), fname)
            elif op.name == "xhlo.while":
                self._while(op, fname)
            elif op.name == "xhlo.conditional":
                self._conditional(op)

    def _in_place(self, op: ir.Operation, indices: list[int], fname: str) -> None:
        for i in indices:
            value = op.operands[i]
            if is_parameter(value):
                self._copy(op, i, "in-place update of a parameter (read-only buffer)", fname)
            elif is_constant(value):
                self._copy(op, i, "in-place update of a constant (read-only buffer)", fname)
            elif other_uses(value, op, ordered=op.name == "xhlo.scatter",
                            exempt=same_window_reads(op) if op.name == "xhlo.dynamic_update_slice" else ()) > 0:
                self._copy(op, i, "in-place update of a value that is still live", fname)

    def _while(self, op: ir.Operation, fname: str) -> None:
        seen = []
        for i, value in enumerate(list(op.operands)):
            if not is_tensor(value):
                continue
            if any(buffer_chain(value)[-1] == s for s in seen):
                self._copy(op, i, "while init passed twice (carried buffers would alias)", fname)
            elif passes_through(op, i):
                pass  # never written by the loop: it may keep the init's buffer
            elif is_parameter(value):
                self._copy(op, i, "while init is a parameter (the loop writes its buffer)", fname)
            elif is_constant(value):
                self._copy(op, i, "while init is a constant (the loop writes its buffer)", fname)
            elif other_uses(value, op, ordered=True) > 0:
                self._copy(op, i, "while init is live after the loop", fname)
            seen.append(buffer_chain(value)[-1])
        body = op.regions[1].blocks[0]
        terminator = body.operations[len(body.operations) - 1].operation
        seen = []
        for i, value in enumerate(list(terminator.operands)):
            if is_tensor(value) and any(buffer_chain(value)[-1] == s for s in seen):
                self._copy(terminator, i, "while body returns a value twice (carried buffers would alias)", fname)
            elif is_tensor(value) and is_constant(value):
                self._copy(terminator, i, "while body returns a constant (the loop writes its carried buffer)", fname)
            elif is_tensor(value) and defined_outside(buffer_chain(value)[-1], body):
                self._copy(terminator, i, "while body returns a value from outside the loop (the loop writes its carried buffer)",
                           fname)
            elif is_tensor(value) and not passes_through(op, i) and overwrites_live_parameter(body, i):
                self._copy(terminator, i, "while body result would overwrite its carried value while the body still reads it", fname)
            seen.append(buffer_chain(value)[-1])

    def _conditional(self, op: ir.Operation) -> None:
        """Each branch's results share the conditional's result buffers: a branch returning a
        constant, one of its parameters (the conditional's operands) or one value twice
        returns a copy instead. Each is seen through the bitcasts and optimization barriers
        that forward their operand's buffer: a branch returning a barrier of its parameter
        otherwise made the operand, the result and the other branches' operands one buffer,
        and the op computing one branch's operand overwrote another's (fuzz seed 93 of
        `mlirxla.fuzz.dags`)."""
        module = op.parent
        while module.name != "builtin.module":
            module = module.parent
        functions = {ir.StringAttr(f.attributes["sym_name"]).value: f for f in module.regions[0].blocks[0].operations
                     if f.operation.name == "func.func"}
        for symbol in ir.ArrayAttr(op.attributes["branch_computations"]):
            name = ir.FlatSymbolRefAttr(symbol).value
            block = functions[name].regions[0].blocks[0]
            terminator = block.operations[len(block.operations) - 1].operation
            seen = []
            for i, value in enumerate(list(terminator.operands)):
                if not is_tensor(value):
                    continue
                owner = buffer_chain(value)[-1]
                if is_constant(value):
                    self._copy(terminator, i, "conditional branch returns a constant (the result buffer is written)", name)
                elif isinstance(owner.owner, ir.Block):
                    self._copy(terminator, i, "conditional branch returns its parameter (the result buffer is written)", name)
                elif any(owner == s for s in seen):
                    self._copy(terminator, i, "conditional branch returns a value twice (distinct result buffers)", name)
                seen.append(owner)

    def entry(self, func, block: ir.Block, fname: str) -> None:
        terminator = block.operations[len(block.operations) - 1].operation
        seen = []
        for i, value in enumerate(list(terminator.operands)):
            if not is_tensor(value):
                continue
            if is_parameter(value) and is_donated(func, ir.BlockArgument(buffer_chain(value)[-1]).arg_number):
                pass  # the output is meant to alias its donated parameter
            elif is_parameter(value):
                self._copy(terminator, i, "parameter returned as an output (distinct output buffer)", fname)
            elif is_constant(value):
                self._copy(terminator, i, "constant live out (read-only buffer)", fname)
            elif any(buffer_chain(value)[-1] == s for s in seen):
                self._copy(terminator, i, "value returned twice (distinct output buffers)", fname)
            seen.append(buffer_chain(value)[-1])

    def render(self, module: ir.Module) -> list[str]:
        state = ir.AsmState(module.operation)
        return [f"@{fname} {copy.get_name(state)} : {copy.type}: {why}" for copy, fname, why in self.records]
