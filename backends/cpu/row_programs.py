"""Loop fusions over f32 rows as programs of the runtime library's row engine
(`row_engine.py`), the way XLA:CPU hands a normalization's fusion to YNNPACK: a fusion whose
body fits the engine's vocabulary compiles no kernel, only a call with its program.

The vocabulary: reductions along the last dimension (add, maximum, minimum, from a splat
initial value) of values of one shape, [..., n] (the rows); elementwise f32 ops (`row_engine.UNARY`,
`row_engine.BINARY`) on rows, on per-row values (a reduction's result, kept as [...] or [..., 1])
and on splat constants; broadcasts of per-row values along the last dimension, of per-column
vectors ([n], a layer norm's scale and offset) along the others, and of scalars; reshapes that
keep what a value is (rows, per-row values). Results are rows or per-row values. A program
is built from the results back (`ProgramBuilder`): equal expressions are computed once (a
layer norm's `x - mean`, which the fusion computes twice); an elementwise op on broadcast
per-row values stays per row (`var + eps`, `rsqrt`), so only what varies along the row is
computed over it; rows plus, minus or times a per-row value are not computed but read
through a per-row shift and scale by the instructions reading them (`Value`: a layer norm's
`(x - mean) * rsqrt(var)` is x read through the mean and rsqrt(var)); the product a reduction
alone reads is reduced without being written (a variance's squares); two adds, subtracts or
multiplies over rows in a row are one chain instruction (`* scale + offset`); a result's
instruction writes the output itself. jax's layer norm is then the generated kernel's three
passes over the rows. Values live in slots (`row_engine.py`); scratch slots are reused once
dead, an elementwise instruction writing the slot of an operand of the same kind it reads
last.

Run time is the generated kernel's within noise (one thread, calls of the two alternating,
best of 100-150: layer norm 8192x1024 0.85-0.92x, rms norm 1.03-1.05x, log-softmax and a
log-sum-exp with the shifted logits 0.8-1.01x, layer norm 256x512 in cache 1.05x), so every
fusion that fits takes the engine; jax.nn.softmax keeps the library's own softmax
(`softmax_rows.py`, recognized first), which the engine runs 1.19x as long (it writes the
exponentials, then reads them to sum them, where that function sums them as it writes them).
"""

import struct
from dataclasses import dataclass, field
from math import prod

from mlirxla.mlir import ir
from .row_engine import BINARY, BUFFERS, CHAINED, OPCODES, REDUCTIONS, SLOTS, UNARY, WORDS

BLOCK_ELEMENTS = 2048  # a block's rows, in elements: each scratch slot of a block is 8 KiB
STACK_BYTES = 512 * 1024  # the scratch slots of one call at most (they are on the stack)
ROWS, PER_ROW, COLUMNS = "rows", "per_row", "columns"  # what a slot holds (columns: rows of stride 0)
FULL, ROW, SCALAR, COLUMN = "full", "row", "scalar", "column"  # what shape a value is asked for


class NotARowProgram(Exception):
    pass


@dataclass
class Instruction:
    opcode: int
    dest: int  # a virtual slot
    immediate: int = 0
    reads: tuple = ()  # virtual slots read
    transform: tuple = ()  # the per-row shift and scale slots a rows operand a is read through


@dataclass
class RowProgram:
    """A fusion's program: its words, the rows and their length, the rows of a block, the
    scratch slots, and what each operand and result is (rows, per-row values, a per-column
    vector, a scalar), with the instruction writing each result and the last reading each
    operand (for in-place results)."""

    words: list[int]
    rows: int
    n: int
    block: int
    scratch_slots: int
    operands: list[str]
    results: list[str]
    last_read: list[int] = field(default_factory=list)  # per operand: the last instruction reading it (-1: none)
    written_at: list[int] = field(default_factory=list)  # per result: the instruction writing it

    @property
    def instructions(self) -> int:
        return len(self.words) // WORDS


@dataclass(frozen=True)
class Value:
    """A slot's values, read through (slot - shift) * scale when either is given (per-row
    slots): `x - mean` and `* rsqrt(var)` cost no pass of their own."""

    slot: int
    kind: str
    computed: bool  # by an instruction of the program (not a load)
    shift: int | None = None
    scale: int | None = None

    @property
    def plain(self) -> bool:
        return self.shift is None and self.scale is None


class ProgramBuilder:
    def __init__(self, fusion: ir.Operation, rows: int, n: int):
        self.rows, self.n = rows, n
        self.arguments = list(fusion.regions[0].blocks[0].arguments)
        self.roles: list[str | None] = [None] * len(self.arguments)
        self.instructions: list[Instruction] = []
        self.expressions: dict = {}
        self.values: dict = {}
        self.slots = 0
        self.bound: set[int] = set()
        self.zero = self.emit("splat", immediate=0)  # made first, read by any instruction reading through a transform
        self.one = self.emit("splat", immediate=ONE_BITS)

    def fresh(self) -> int:
        self.slots += 1
        return self.slots - 1

    def emit(self, opcode, reads=(), immediate=0, through: Value | None = None) -> int:
        """The slot of instruction `opcode` over `reads` (made once), its rows operand a read
        through `through`'s shift and scale when the instruction reads rows."""
        transform = (self.transform_of(through),) if reads_rows(opcode) and through is not None and not through.plain else ()
        if reads_rows(opcode):
            opcode = (*opcode, bool(transform))
        key = (opcode, reads, immediate, transform)
        if key not in self.expressions:
            dest = self.fresh()
            self.instructions.append(Instruction(OPCODES[opcode], dest, immediate, reads, transform[0] if transform else ()))
            self.expressions[key] = dest
        return self.expressions[key]

    def transform_of(self, value: Value) -> tuple[int, int]:
        """The shift and scale slots `value` is read through (0 and 1 for the one it lacks)."""
        return (self.zero if value.shift is None else value.shift), (self.one if value.scale is None else value.scale)

    def materialized(self, value: Value) -> Value:
        """`value` in a slot of its own when it is read through a shift or scale."""
        if value.plain:
            return value
        return Value(self.emit(("unary_rows", "copy"), (value.slot,), through=value), ROWS, True)

    # --- values ----------------------------------------------------------------------------

    def value(self, value: ir.Value, role: str) -> Value:
        key = (value, role)
        if key not in self.values:
            self.values[key] = self.translate(value, role)
        return self.values[key]

    def translate(self, value: ir.Value, role: str) -> Value:
        value_type = ir.RankedTensorType(value.type)
        if not isinstance(value_type.element_type, ir.F32Type):
            raise NotARowProgram("not f32")
        shape = list(value_type.shape)
        self.check_shape(shape, role)
        if isinstance(value, ir.BlockArgument):
            return self.argument(value.arg_number, role)
        op = value.owner
        name = op.name
        if name == "xhlo.constant":
            return Value(self.emit("splat", immediate=splat_bits(op)), PER_ROW, False)
        if name in ("xhlo.reshape", "xhlo.bitcast"):
            operand_shape = list(ir.RankedTensorType(op.operands[0].type).shape)
            if role == FULL and operand_shape[-1:] != [self.n]:
                raise NotARowProgram("a reshape across the rows")
            return self.value(op.operands[0], role)
        if name == "xhlo.broadcast":
            return self.broadcast(op, shape, role)
        if name == "xhlo.reduce":
            return self.reduce(op, role)
        if name in UNARY and len(op.operands) == 1:
            x = self.value(op.operands[0], role)
            if x.kind == PER_ROW:
                return Value(self.emit(("unary_per_row", name), (x.slot,)), PER_ROW, True)
            return Value(self.emit(("unary_rows", name), (x.slot,), through=x), ROWS, True)
        if name in BINARY and len(op.operands) == 2:
            x, y = (self.value(operand, role) for operand in op.operands)
            return self.transformed(name, x, y) or self.binary(name, x, y)
        raise NotARowProgram(f"{name} is not in the vocabulary")

    def binary(self, name: str, x: Value, y: Value) -> Value:
        variant = "_".join("per_row" if v.kind == PER_ROW else "rows" for v in (x, y))
        if variant == "per_row_per_row":
            return Value(self.emit(("binary", name, variant), (x.slot, y.slot)), PER_ROW, True)
        if variant == "per_row_rows":
            return Value(self.emit(("binary", name, variant), (x.slot, self.materialized(y).slot)), ROWS, True)
        return Value(self.emit(("binary", name, variant), (x.slot, self.materialized(y).slot), through=x), ROWS, True)

    def transformed(self, name: str, x: Value, y: Value) -> Value | None:
        """Rows plus, minus or times a per-row value as the rows read through a shift or scale
        (composed with the one they have: a shift after a scale is not one), else None."""
        if name in ("xhlo.add", "xhlo.multiply") and x.kind == PER_ROW:
            x, y = y, x
        if name not in ("xhlo.add", "xhlo.subtract", "xhlo.multiply") or x.kind == PER_ROW or y.kind != PER_ROW:
            return None
        shift, scale = x.shift, x.scale
        if name == "xhlo.multiply":
            scale = y.slot if scale is None else self.emit(("binary", "xhlo.multiply", "per_row_per_row"), (scale, y.slot))
        elif scale is not None:
            return None
        elif name == "xhlo.subtract":
            shift = y.slot if shift is None else self.emit(("binary", "xhlo.add", "per_row_per_row"), (shift, y.slot))
        else:
            negated = self.emit(("unary_per_row", "xhlo.negate"), (y.slot,))
            shift = negated if shift is None else self.emit(("binary", "xhlo.subtract", "per_row_per_row"), (shift, y.slot))
        return Value(x.slot, x.kind, x.computed, shift, scale)

    def check_shape(self, shape: list[int], role: str) -> None:
        count = prod(shape)
        expected = {FULL: self.rows * self.n, ROW: self.rows, SCALAR: 1, COLUMN: self.n}[role]
        if count != expected or (role == FULL and shape[-1:] != [self.n]):
            raise NotARowProgram(f"a value of shape {shape} where {role} values are")

    def argument(self, number: int, role: str) -> Value:
        role_of = {FULL: ROWS, ROW: PER_ROW, SCALAR: SCALAR, COLUMN: COLUMNS}[role]
        if self.roles[number] not in (None, role_of):
            raise NotARowProgram("an operand read as two kinds of value")
        self.roles[number] = role_of
        opcode = {ROWS: "load_rows", PER_ROW: "load_per_row", SCALAR: "load_scalar", COLUMNS: "load_columns"}[role_of]
        return Value(self.emit(opcode, immediate=number), {SCALAR: PER_ROW}.get(role_of, role_of), False)

    def broadcast(self, op: ir.Operation, shape: list[int], role: str) -> Value:
        operand = op.operands[0]
        operand_shape = list(ir.RankedTensorType(operand.type).shape)
        dimensions = list(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
        if dimensions != sorted(dimensions):
            raise NotARowProgram("a transposing broadcast")
        count = prod(operand_shape)
        if count == 1:
            return self.value(operand, SCALAR)
        if role in (ROW, COLUMN):
            return self.value(operand, role)
        last = len(shape) - 1
        along_rows = last in dimensions and operand_shape[dimensions.index(last)] == self.n
        if along_rows and count == self.n:
            return self.value(operand, COLUMN)
        return self.value(operand, FULL if along_rows else ROW)

    def reduce(self, op: ir.Operation, role: str) -> Value:
        if role not in (ROW, SCALAR) or len(op.operands) != 2:
            raise NotARowProgram("a reduction read as rows")
        operand_type = ir.RankedTensorType(op.operands[0].type)
        if list(ir.DenseI64ArrayAttr(op.attributes["dimensions"])) != [operand_type.rank - 1]:
            raise NotARowProgram("a reduction along another dimension")
        body = list(op.regions[0].blocks[0].operations)
        arguments = list(op.regions[0].blocks[0].arguments)
        if len(body) != 2 or body[0].name not in REDUCTIONS or set(body[0].operands) != set(arguments) or body[1].operands[0] != body[0].results[0]:
            raise NotARowProgram("a reduction of another combiner")
        combiner = body[0].name
        reduced = self.product_reduced(op.operands[0], combiner)
        if reduced is None:
            x = self.value(op.operands[0], FULL)
            if x.kind == PER_ROW:
                raise NotARowProgram("a reduction of a broadcast value")
            reduced = Value(self.emit(("reduce", combiner), (x.slot,), through=x), PER_ROW, True)
        initial = op.operands[1]
        if is_constant(initial) and splat_bits(initial.owner) == int(REDUCTIONS[combiner][0], 16):
            return reduced
        initial_value = self.value(initial, SCALAR)
        return Value(self.emit(("binary", combiner, "per_row_per_row"), (reduced.slot, initial_value.slot)), PER_ROW, True)

    def product_reduced(self, value: ir.Value, combiner: str) -> Value | None:
        """The reduction of `value` as one instruction when it is a product of two rows read
        by the reduction alone, through one shift and scale (a variance's squares), else None."""
        if isinstance(value, ir.BlockArgument) or value.owner.name != "xhlo.multiply" or len(list(value.uses)) != 1:
            return None
        x, y = (self.value(operand, FULL) for operand in value.owner.operands)
        if PER_ROW in (x.kind, y.kind) or (x.shift, x.scale) != (y.shift, y.scale):
            return None
        return Value(self.emit(("reduce_product", combiner), (x.slot, y.slot), through=x), PER_ROW, True)

    # --- results ---------------------------------------------------------------------------

    def result(self, value: ir.Value, number: int) -> str:
        """Make the program write result `number` (buffer after the operands); what it is."""
        count = prod(ir.RankedTensorType(value.type).shape)
        role = FULL if count == self.rows * self.n and ir.RankedTensorType(value.type).shape[-1:] == [self.n] else ROW
        x = self.value(value, role)
        buffer = len(self.arguments) + number
        kind = ROWS if role == FULL else PER_ROW
        if x.computed and x.plain and x.slot not in self.bound and x.kind == kind:
            self.bound.add(x.slot)
            self.instructions.insert(0, Instruction(OPCODES["load_rows" if kind == ROWS else "load_per_row"], x.slot, immediate=buffer))
            return kind
        dest = self.fresh()
        self.bound.add(dest)
        self.instructions.insert(0, Instruction(OPCODES["load_rows" if kind == ROWS else "load_per_row"], dest, immediate=buffer))
        if kind == PER_ROW:
            opcode = ("unary_per_row", "copy")
        else:
            opcode = "broadcast_rows" if x.kind == PER_ROW else ("unary_rows", "copy")
        transform = self.transform_of(x) if reads_rows(opcode) and not x.plain else ()
        if reads_rows(opcode):
            opcode = (*opcode, bool(transform))
        self.instructions.append(Instruction(OPCODES[opcode], dest, reads=(x.slot,), transform=transform))
        return kind


def is_constant(value: ir.Value) -> bool:
    return not isinstance(value, ir.BlockArgument) and value.owner.name == "xhlo.constant"


def splat_bits(op: ir.Operation) -> int:
    attribute = op.attributes["value"]
    if not isinstance(attribute, ir.DenseElementsAttr) or not attribute.is_splat:
        raise NotARowProgram("a constant that is no splat")
    return struct.unpack("<I", struct.pack("<f", ir.FloatAttr(attribute.get_splat_value()).value))[0]


def row_shape(fusion: ir.Operation) -> list[int]:
    """The rows' shape: the operand of the body's reductions (one shape for all of them)."""
    shapes = {tuple(ir.RankedTensorType(inner.operands[0].type).shape)
              for inner in fusion.regions[0].blocks[0].operations if inner.name == "xhlo.reduce"}
    if len(shapes) != 1:
        raise NotARowProgram("no row reduction" if not shapes else "reductions of different shapes")
    return list(shapes.pop())


def row_program(fusion: ir.Operation) -> RowProgram | None:
    """The engine's program for loop fusion `fusion`, or None when its body does not fit."""
    if fusion.name != "xhlo.fusion" or len(fusion.operands) + len(fusion.results) > BUFFERS:
        return None
    try:
        shape = row_shape(fusion)
        n = shape[-1] if shape else 0
        rows = prod(shape[:-1])
        if n < 2 or rows < 1:
            return None
        builder = ProgramBuilder(fusion, rows, n)
        block = fusion.regions[0].blocks[0]
        returned = list(block.operations)[-1].operands
        results = [builder.result(value, number) for number, value in enumerate(returned)]
    except NotARowProgram:
        return None
    chain_instructions(builder)
    return allocate(builder, results)


def chain_instructions(builder: ProgramBuilder) -> None:
    """Two adds, subtracts or multiplies over rows, the first's value read by the second alone
    (as its first operand), become one chain instruction: one pass over the rows instead of
    two, the value between never written (a layer norm's `* scale + offset`)."""
    instructions = builder.instructions
    uses = {}
    for instruction in instructions:
        for slot in (*instruction.reads, *instruction.transform):
            uses[slot] = uses.get(slot, 0) + 1
    producers = {instruction.dest: instruction for instruction in instructions}
    kinds = {instruction.dest: kind_written(instruction) for instruction in instructions}
    absorbed = set()
    for instruction in reversed(instructions):
        if id(instruction) in absorbed or not chainable(instruction, kinds):
            continue
        between = instruction.reads[0]
        producer = producers.get(between)
        if producer is None or id(producer) in absorbed or not chainable(producer, kinds) or uses[between] != 1 \
                or between in builder.bound or instruction.transform:
            continue
        operands = (producer.reads[1], instruction.reads[1])
        variant = "_".join("per_row" if kinds[slot] == PER_ROW else "rows" for slot in operands)
        if variant not in ("rows_rows", "rows_per_row"):
            continue
        instruction.opcode = OPCODES[("chain", OPCODES_BY_CODE[producer.opcode][1], OPCODES_BY_CODE[instruction.opcode][1], variant,
                                      bool(producer.transform))]
        instruction.reads = (producer.reads[0], *operands)
        instruction.transform = producer.transform
        absorbed.add(id(producer))
    builder.instructions = [part for part in instructions if id(part) not in absorbed]


def chainable(instruction: Instruction, kinds: dict) -> bool:
    """An add, subtract or multiply whose first operand is rows (so is its result)."""
    name = OPCODES_BY_CODE[instruction.opcode]
    return isinstance(name, tuple) and name[0] == "binary" and name[1] in CHAINED and name[2].startswith("rows") \
        and kinds[instruction.reads[0]] != PER_ROW


def allocate(builder: ProgramBuilder, results: list[str]) -> RowProgram | None:
    """Physical slots for the virtual ones: loads and results their own, scratch values the
    lowest free scratch slot (an elementwise instruction may write the slot of an operand of
    its own kind that dies there); the words, the block, and what each operand and result
    read and written where."""
    used = {slot for instruction in builder.instructions for slot in (*instruction.reads, *instruction.transform)} | builder.bound
    instructions = [instruction for instruction in builder.instructions
                    if OPCODES_BY_CODE[instruction.opcode] not in LOAD_NAMES or instruction.dest in used]
    last_use = {}
    for index, instruction in enumerate(instructions):
        for slot in (*instruction.reads, *instruction.transform):
            last_use[slot] = index
    loads = [instruction for instruction in instructions if OPCODES_BY_CODE[instruction.opcode] in LOAD_NAMES]
    pointed = {instruction.dest for instruction in loads if OPCODES_BY_CODE[instruction.opcode] not in ("splat", "load_scalar")}
    kinds = {instruction.dest: kind_written(instruction) for instruction in instructions}
    physical, free, scratch = {}, [], 0
    for index, instruction in enumerate(instructions):
        dying = [slot for slot in dict.fromkeys((*instruction.reads, *instruction.transform)) if last_use.get(slot) == index and slot not in pointed]
        if instruction.dest not in physical and instruction.dest not in pointed:
            reusable = [slot for slot in dying if kinds[slot] == kinds[instruction.dest] and in_place(instruction)]
            if reusable:
                physical[instruction.dest] = physical[reusable[0]]
                dying.remove(reusable[0])
            elif free:
                physical[instruction.dest] = free.pop(free.index(min(free)))
            else:
                physical[instruction.dest], scratch = scratch, scratch + 1
        free += [physical[slot] for slot in dying]
    for offset, slot in enumerate(sorted(pointed)):
        physical[slot] = scratch + offset
    if scratch + len(pointed) > SLOTS:
        return None
    n, rows = builder.n, builder.rows
    block = min(rows, max(1, BLOCK_ELEMENTS // n))
    if scratch * block * n * 4 > STACK_BYTES:
        return None
    words = []
    for instruction in instructions:
        reads = ([physical[slot] for slot in instruction.reads] + [0, 0, 0])[:3]
        transform = [physical[slot] for slot in instruction.transform] or [0, 0]
        words += [instruction.opcode, physical[instruction.dest], *reads, *transform, instruction.immediate]
    operand_count = len(builder.arguments)
    last_read = [-1] * operand_count
    load_of = {instruction.dest: instruction.immediate for instruction in loads}
    for index, instruction in enumerate(instructions):
        for slot in (*instruction.reads, *instruction.transform):
            if slot in load_of and load_of[slot] < operand_count:
                last_read[load_of[slot]] = index
    written_at = [-1] * len(results)
    for index, instruction in enumerate(instructions):
        if instruction.dest in load_of and load_of[instruction.dest] >= operand_count and OPCODES_BY_CODE[instruction.opcode] not in LOAD_NAMES:
            written_at[load_of[instruction.dest] - operand_count] = index
    operands = [role or "unused" for role in builder.roles]
    return RowProgram(words, rows, n, block, scratch, operands, results, last_read, written_at)


OPCODES_BY_CODE = {code: name for name, code in OPCODES.items()}
ONE_BITS = 0x3F800000  # 1.0f
LOAD_NAMES = ("load_rows", "load_columns", "load_per_row", "load_scalar", "splat")


def reads_rows(opcode) -> bool:
    """Whether instruction `opcode` reads its operand a as rows (and may read it through a
    shift and scale)."""
    return isinstance(opcode, tuple) and (opcode[0] in ("unary_rows", "chain", "reduce", "reduce_product")
                                          or (opcode[0] == "binary" and opcode[2].startswith("rows")))


def kind_written(instruction: Instruction) -> str:
    name = OPCODES_BY_CODE[instruction.opcode]
    if name in ("load_rows", "broadcast_rows") or (name[0] == "unary_rows") or (name[0] == "binary" and name[2] != "per_row_per_row"):
        return ROWS
    return COLUMNS if name == "load_columns" else PER_ROW


def in_place(instruction: Instruction) -> bool:
    """Whether the instruction may write the slot it reads (element i read before written):
    elementwise ops, not broadcasts (a row's value is read after the row before is written)
    nor reductions."""
    name = OPCODES_BY_CODE[instruction.opcode]
    return isinstance(name, tuple) and name[0] in ("unary_rows", "unary_per_row", "binary")

