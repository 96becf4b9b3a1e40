"""A kernel holding several convolutions, compiled as parts that LLVM works on in parallel.

A batch-slice kernel keeps one image through a chain of convolutions (the conv net's two:
conv, bias, relu, conv, bias, relu, mean). Each register-tiled convolution is a few hundred
lines of LLVM IR whose O3 and code generation cost tens of milliseconds, and one kernel is
one LLVM module: its lowering, then its LLVM work, ran one after the other on the cold
compile's critical path while the second core had nothing to do. Here the kernel's StableHLO
function is cut before each convolution after the first into parts, each a function of its
own lowered in a module of its own: a part's LLVM IR goes to the compile threads while the
next part is lowered, and the parts' LLVM work runs side by side. The last part is the kernel
itself, which first calls the earlier parts.

What goes where: an op belongs to the last part whose convolution it depends on (part 0 for
those that depend on none), so every part reads only what earlier parts computed. A value
one part computes and a later part reads (the first convolution's relu on the conv net) is
written to a buffer the kernel allocates, which becomes a scratch argument like every other
allocation (`kernel_scratch.py`; on the conv net the kernel materialized that value anyway,
to copy it into the second convolution's padded input). Ops computed from nothing but the
kernel's operands and constants (a bias broadcast, a constant) are not passed: each part
that reads them keeps its own. Every part takes all of the kernel's arguments, then the
buffers it reads and writes (noalias: each is an allocation of its own), then its own
scratch, which the kernel allocates and passes on (the part's allocations, known once it is
lowered).

Kernels that update an operand in place are not cut: a later part could write a result
over an operand an earlier part still reads.
"""

from dataclasses import dataclass

from mlirxla.ir_queries import ops_named
from mlirxla.mlir import func, ir

from .kernel_scratch import ScratchArgument
from .kernel_source import memref_of, signless
from .materialization import DESCRIPTION_MARK

CUT_BEFORE = "stablehlo.convolution"
# ops that read nothing a part computes: each part keeps its own copy instead of a buffer
RECOMPUTED = {"stablehlo.constant", "stablehlo.iota", "bufferization.to_tensor", "stablehlo.broadcast_in_dim",
              "stablehlo.reshape", "stablehlo.convert"}


@dataclass
class Part:
    """One part of a cut kernel: its symbol, its module (StableHLO, then lowered in place), the
    buffers it reads and writes (indices into `Cut.buffers`), and once lowered its scratch."""

    symbol: str
    module: ir.Module
    reads: list[int]
    writes: list[int]
    scratch: list[ScratchArgument] | None = None
    allocations: dict[int, ir.Value] | None = None  # the kernel's: its buffers allocated so far


@dataclass
class Cut:
    """A kernel cut into parts: the earlier parts (each its own function) and the kernel's own
    module (the last part, calling the others once `call_parts` has run), and the tensor
    type of each buffer passed between parts."""

    parts: list[Part]
    kernel: Part
    buffers: list[ir.Type]
    locations: list[ir.Location]  # of the op computing each buffer's value: what its allocation materializes


def part_indices(function: func.FuncOp) -> list[int] | None:
    """For each op of `function`'s body in order, the part it belongs to: the number of
    convolutions after the first that it depends on, counted by the last of them; None when the
    function has fewer than two convolutions."""
    ops = list(function.regions[0].blocks[0].operations)
    position = {op.operation: index for index, op in enumerate(ops)}
    cuts = [index for index, op in enumerate(ops) if op.operation.name == CUT_BEFORE][1:]
    if not cuts:
        return None
    parts = [0] * len(ops)
    for part, start in enumerate(cuts, start=1):
        reached, pending = {start}, [start]
        while pending:
            for result in ops[pending.pop()].operation.results:
                for use in result.uses:
                    user = position[top_level(use.owner, function)]
                    if user not in reached:
                        reached.add(user)
                        pending.append(user)
        for index in reached:
            parts[index] = max(parts[index], part)
    return parts


def top_level(op: ir.Operation, function: func.FuncOp) -> ir.Operation:
    """The op of `function`'s body that holds `op` (itself when it is one)."""
    op = op.operation
    while op.parent != function.operation:
        op = op.parent
    return op


def cut(module: ir.Module, symbol: str) -> Cut | None:
    """The kernel function `symbol` of the StableHLO module `module` (left as it is) cut before
    each convolution after the first; None when it has fewer than two, or updates an operand
    in place."""
    function = only_function(module, symbol)
    if function is None or any("writable" in op.attributes for op in ops_named(function, "bufferization.to_tensor")):
        return None
    parts = part_indices(function)
    if parts is None:
        return None
    ops = list(function.regions[0].blocks[0].operations)
    position = {op.operation: index for index, op in enumerate(ops)}
    buffers: dict[tuple[int, int], int] = {}  # (op, result) -> buffer
    for index, op in enumerate(ops):
        for operand in op.operation.operands:
            producer = operand.owner
            if isinstance(producer, ir.Block):
                continue
            source = position[top_level(producer, function)]
            if parts[source] < parts[index] and ops[source].operation.name not in RECOMPUTED:
                buffers.setdefault((source, result_number(operand)), len(buffers))
    types = [ops[source].operation.results[result].type for source, result in buffers]
    locations = [ops[source].location for source, _ in buffers]
    count = max(parts) + 1
    made = [part_of(copy_of(function), symbol, part, count, parts, buffers) for part in range(count)]
    return Cut(made[:-1], made[-1], types, locations)


def copy_of(function: func.FuncOp) -> ir.Module:
    """A module holding a copy of `function` (its locations kept: they say what scratch holds)."""
    with function.context:
        module = ir.Module.create(function.location)
        function.operation.clone(ir.InsertionPoint(module.body))
    return module


def only_function(module: ir.Module, symbol: str) -> func.FuncOp | None:
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == symbol:
            return op
    return None


def result_number(value: ir.Value) -> int:
    return next(index for index, result in enumerate(value.owner.results) if result == value)


def part_of(module: ir.Module, symbol: str, part: int, count: int, parts: list[int], buffers: dict[tuple[int, int], int]) -> Part:
    """Part `part` of the kernel in `module` (a copy of it): the function keeps the
    ops of that part (and the recomputed ones it reads), reads earlier parts' values from
    buffers and writes the values later parts read into buffers. The last part keeps the
    kernel's symbol; it allocates the buffers (`call_parts` adds the calls)."""
    function = only_function(module, symbol)
    entry = function.regions[0].blocks[0]
    ops = list(entry.operations)
    last = part == count - 1
    reads = sorted({buffer for (source, _), buffer in buffers.items() if parts[source] < part})
    writes = sorted({buffer for (source, _), buffer in buffers.items() if parts[source] == part})
    for index in reversed(range(len(ops) - 1)):  # the terminator stays
        if parts[index] > part:
            ops[index].operation.erase()
    first = ops[0]
    by_buffer = {buffer: key for key, buffer in buffers.items()}
    allocations = {}
    with module.context, ir.Location.unknown():
        for buffer in reads:
            source, result = by_buffer[buffer]
            value = ops[source].operation.results[result]
            with ir.InsertionPoint(first):
                memory = allocate(memref_of(value.type), ops[source].location) if last else added_argument(function, memref_of(value.type))
                allocations[buffer] = memory
                loaded = ir.Operation.create("bufferization.to_tensor", results=[signless(value.type)], operands=[memory],
                                             attributes={"restrict": ir.UnitAttr.get()}).result
            value.replace_all_uses_with(loaded)
        for buffer in writes:
            source, result = by_buffer[buffer]
            value = ops[source].operation.results[result]
            destination = added_argument(function, memref_of(value.type))
            with ir.InsertionPoint(entry.operations[len(entry.operations) - 1]):
                ir.Operation.create("bufferization.materialize_in_destination", operands=[value, destination],
                                    attributes={"restrict": ir.UnitAttr.get(), "writable": ir.UnitAttr.get()})
    for index in reversed(range(len(ops) - 1)):
        if parts[index] < part and ops[index].operation.name not in RECOMPUTED:
            ops[index].operation.erase()
    if not last:
        function.attributes["sym_name"] = ir.StringAttr.get(part_symbol(symbol, part), module.context)
    return Part(symbol if last else part_symbol(symbol, part), module, reads, writes, allocations=allocations if last else None)


def part_symbol(symbol: str, part: int) -> str:
    """The symbol of a kernel's part: named after the kernel, so that kernels of the same code
    name their parts alike (`compiler.without_symbol`)."""
    return f"{symbol}.part{part}"


def added_argument(function: func.FuncOp, memref_type: ir.Type) -> ir.Value:
    """A new last argument of `function`, noalias (a buffer of its own)."""
    entry = function.regions[0].blocks[0]
    existing = len(entry.arguments)
    argument = entry.add_argument(memref_type, ir.Location.unknown())
    function.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get([a.type for a in entry.arguments], []))
    kept = list(ir.ArrayAttr(function.attributes["arg_attrs"])) if "arg_attrs" in function.attributes else [ir.DictAttr.get({})] * existing
    function.attributes["arg_attrs"] = ir.ArrayAttr.get(kept + [ir.DictAttr.get({"llvm.noalias": ir.UnitAttr.get()})])
    return argument


def call_parts(cut_kernel: Cut) -> None:
    """Make the kernel's function call the earlier parts, lowered by now (their scratch known),
    before its own ops: each gets the kernel's arguments, the buffers it reads and writes (the
    kernel's allocations) and its scratch (allocated here too: the kernel's scratch then)."""
    module = cut_kernel.kernel.module
    entry = only_function(module, cut_kernel.kernel.symbol).regions[0].blocks[0]
    arguments = list(entry.arguments)
    memory = dict(cut_kernel.kernel.allocations)
    first = next(op for op in entry.operations if op.operation.name != "memref.alloc")
    with module.context, ir.Location.unknown(), ir.InsertionPoint(first):
        for buffer, tensor_type in enumerate(cut_kernel.buffers):
            if buffer not in memory:
                memory[buffer] = allocate(memref_of(tensor_type), cut_kernel.locations[buffer])
        for part in cut_kernel.parts:
            scratch = [allocate(ir.MemRefType.get([argument.size], ir.IntegerType.get_signless(8)),
                                ir.Location.name(f"{DESCRIPTION_MARK}{part.symbol}: {argument.holds}")) for argument in part.scratch]
            operands = arguments + [memory[buffer] for buffer in part.reads + part.writes] + scratch
            with ir.InsertionPoint(module.body):
                func.FuncOp(part.symbol, ir.FunctionType.get([value.type for value in operands], []), visibility="private")
            func.CallOp([], ir.FlatSymbolRefAttr.get(part.symbol), operands)


def allocate(memref_type: ir.Type, location: ir.Location) -> ir.Value:
    """An allocation at `location` (what `kernel_scratch` says it holds)."""
    return ir.Operation.create("memref.alloc", results=[memref_type], operands=[], loc=location,
                               attributes={"operandSegmentSizes": ir.DenseI32ArrayAttr.get([0, 0])}).result
