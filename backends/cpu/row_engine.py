"""The runtime library's row-program engine (`runtime_library.ROWS`): one shape-generic
function that runs a small program over f32 rows, the way XLA:CPU hands a normalization's
fusion to YNNPACK's precompiled kernels. A fusion the engine takes (`row_programs.py` makes
its program) compiles no kernel of its own, only a call with its program as a constant.

    mlirxla_rows_f32(program, instructions, rows, n, block, scratch slots, buffer 0..7)

The rows are taken `block` at a time (a block's slots stay in the caches, and short rows
still amortize an instruction's dispatch); each instruction of the program runs over the
whole block before the next. An instruction is eight words, (opcode, d, a, b, c, shift,
scale, immediate), over slots: a slot is a buffer, an offset and a row stride (elements). A slot holds either
rows (`block` rows of `n`, row stride `n`; a per-column vector such as a layer norm's scale is
rows of stride 0) or per-row values (`block` of them, contiguous). Loads point a slot into a
buffer (the operands, then the outputs: an output's slot is loaded too, so the instruction
computing it writes the output itself) at the block's rows; the scratch slots (the first
`scratch slots`) are `block` x `n` floats each on the stack. An instruction reading rows a
may read them through a transform, (a - shift) * scale with per-row shift and scale slots
(`row_programs.Value`): centering and scaling cost no pass of their own.

Elementwise ops run as a 16-lane vector loop and the rest as one masked vector (no scalar
loop), in the ops the generated kernels use (`math.exp` and friends, which
`math_approximations.py` makes the same arithmetic in both), so results agree with a
generated kernel's to rounding; a row reduction keeps four vectors of 16 partial results,
reassociated as the vectorized kernels' reductions are. Vectors are written out (not left
to the loop vectorizer) so that an instruction may write the slot it reads (the program
reuses dead slots), which would make the vectorizer's overlap check fail. Each instruction
but the loads is a function of its own, never inlined (`cases_kept_apart`): LLVM's time grows faster than
linearly in one function's size (one function holding them all: 4-7 s of O3 and code
generation on this machine); separate, about 3.6 s of CPU, once per host and version
(`library_cache.py`; `scripts/setup` builds it), as for the library's other functions.
"""

import re

from .loop_text import LoopText

WIDTH = 16
VECTOR = f"vector<{WIDTH}xf32>"
BUFFERS = 8  # operands and outputs of one call at most; the scratch is buffer BUFFERS
SLOTS = 32
WORDS = 8  # per instruction: opcode, d, a, b, c, p, q, immediate
CHAINED = ("xhlo.add", "xhlo.subtract", "xhlo.multiply")  # the ops of a chain instruction
UNROLL = 4  # a reduction's vectors of partial results

# xhlo op -> the op of an f32 or vector value (`{x}` its operand)
UNARY = {
    "copy": "{x}",
    "xhlo.exponential": "math.exp {x} : {t}",
    "xhlo.log": "math.log {x} : {t}",
    "xhlo.tanh": "math.tanh {x} : {t}",
    "xhlo.rsqrt": "math.rsqrt {x} : {t}",
    "xhlo.sqrt": "math.sqrt {x} : {t}",
    "xhlo.negate": "arith.negf {x} : {t}",
    "xhlo.abs": "math.absf {x} : {t}",
}
BINARY = {
    "xhlo.add": "arith.addf", "xhlo.subtract": "arith.subf", "xhlo.multiply": "arith.mulf",
    "xhlo.divide": "arith.divf", "xhlo.maximum": "arith.maximumf", "xhlo.minimum": "arith.minimumf",
}
# combiner -> (its identity as f32 bits, the vector reduction's kind)
REDUCTIONS = {"xhlo.add": ("0x00000000", "add"), "xhlo.maximum": ("0xFF800000", "maximumf"), "xhlo.minimum": ("0x7F800000", "minimumf")}
# operand kinds of a binary op: rows or per-row values, each side
VARIANTS = ("rows_rows", "rows_per_row", "per_row_rows", "per_row_per_row")
LOADS = ("load_rows", "load_columns", "load_per_row", "load_scalar", "splat")


def opcodes() -> dict:
    """Every instruction's opcode, by name: a load, "broadcast_rows", ("unary_per_row", op),
    ("binary", op, "per_row_per_row" | "per_row_rows"), or an instruction reading rows a, with a last element
    saying whether it reads a through the transform (a - p) * q: ("unary_rows", op, t),
    ("binary", op, variant, t), ("reduce", combiner, t), ("reduce_product", combiner, t) (of
    the product of two rows, which it does not write, both through the transform), ("chain",
    op, op, kinds, t) (rows of (a op b) op c in one pass, the value between not written;
    `kinds` says whether c is rows or per-row values, b being rows)."""
    names = [*LOADS, "broadcast_rows"]
    names += [("unary_per_row", op) for op in UNARY]
    names += [("binary", op, variant) for op in BINARY for variant in VARIANTS[2:]]
    # read through a transform or not: the identity's two ops would be a third of a pass's
    rows = [("unary_rows", op) for op in UNARY] + [("binary", op, variant) for op in BINARY for variant in VARIANTS[:2]]
    rows += [(form, op) for form in ("reduce", "reduce_product") for op in REDUCTIONS]
    rows += [("chain", first, second, kinds) for first in CHAINED for second in CHAINED for kinds in VARIANTS[:2]]
    names += [(*name, through) for name in rows for through in (False, True)]
    return {name: code for code, name in enumerate(names)}


OPCODES = opcodes()
BUFFER_TYPE = "memref<?xf32>"


class EngineText(LoopText):
    """`LoopText` with the engine's own pieces: vector loops over a slot's elements."""

    mask: str | None = None  # the lanes vector reads and writes take (the loop's tail), or all

    def index(self, expression: str) -> str:
        return self.value(f"{expression} : index")

    def vector_loop(self, length: str, body) -> None:
        """`body(position, type)` over [0, length): 16 at a time, then the rest as one masked
        vector (no scalar loop: each op is compiled once, in vectors, and the tail rounds as
        the rest does)."""
        whole = self.index(f"arith.subi {length}, {self.index(f'arith.remui {length}, {self.constant(WIDTH)}')}")
        position = self.fresh("c")
        self.open(f"scf.for {position} = {self.constant(0)} to {whole} step {self.constant(WIDTH)}")
        body(position, VECTOR)
        self.close()
        rest = self.index(f"arith.subi {length}, {whole}")
        self.open(f"scf.if {self.value(f'arith.cmpi ne, {rest}, {self.constant(0)} : index')}")
        self.masked(rest, lambda: body(whole, VECTOR))
        self.close()

    def masked(self, count: str, emit) -> None:
        """`emit()` with its vector reads and writes masked to the first `count` lanes (the
        mask stays set when `emit` is None)."""
        self.mask = self.value(f"vector.create_mask {count} : vector<{WIDTH}xi1>")
        if emit is not None:
            emit()
            self.mask = None

    def read(self, memref: str, offset: str, position: str, value_type: str, padding: str | None = None) -> str:
        """The element or vector at `offset + position`; masked, `padding` (0 unless given) in
        the lanes left out."""
        at = self.index(f"arith.addi {offset}, {position}")
        if value_type == "f32":
            return self.value(f"memref.load {memref}[{at}] : {BUFFER_TYPE}")
        if self.mask is None:
            return self.value(f"vector.load {memref}[{at}] : {BUFFER_TYPE}, {value_type}")
        pad = self.splat(padding or self.constant("0.0", "f32"), value_type)
        return self.value(f"vector.maskedload {memref}[{at}], {self.mask}, {pad} : {BUFFER_TYPE}, vector<{WIDTH}xi1>, "
                          f"{value_type} into {value_type}")

    def write(self, value: str, memref: str, offset: str, position: str, value_type: str) -> None:
        at = self.index(f"arith.addi {offset}, {position}")
        if value_type == "f32":
            self.line(f"memref.store {value}, {memref}[{at}] : {BUFFER_TYPE}")
        elif self.mask is None:
            self.line(f"vector.store {value}, {memref}[{at}] : {BUFFER_TYPE}, {value_type}")
        else:
            self.line(f"vector.maskedstore {memref}[{at}], {self.mask}, {value} : {BUFFER_TYPE}, vector<{WIDTH}xi1>, {value_type}")

    def switch(self, header: str, cases: list) -> None:
        """`scf.index_switch` with `header`; `cases` are (label, emit the body) pairs, "default" last."""
        self.line(header)
        for label, emit in cases:
            self.open(label if label == "default" else f"case {label}")
            emit()
            self.close()

    def splat(self, scalar: str, value_type: str) -> str:
        return scalar if value_type == "f32" else self.value(f"vector.broadcast {scalar} : f32 to {value_type}")


class Slot:
    """A slot's memref, offset and row stride as the instruction reads them."""

    def __init__(self, memref: str, offset: str, stride: str):
        self.memref, self.offset, self.stride = memref, offset, stride


def engine_library_text(symbol: str) -> str:
    """The engine's function in the loop dialects (see the module's docstring)."""
    arguments = [("program_start", "memref<1xi64>"), ("count", "index"), ("rows", "index"), ("n", "index"),
                 ("block", "index"), ("scratch_slots", "index")]
    arguments += [(f"buffer{index}_start", "memref<1xf32>") for index in range(BUFFERS)]
    text = EngineText(symbol, arguments)
    words = text.index(f"arith.muli %count, {text.constant(WORDS)}")
    text.line(f"%program = memref.reinterpret_cast %program_start to offset: [0], sizes: [{words}], strides: [1] "
              f": memref<1xi64> to memref<?xi64>")
    elements = text.index("arith.muli %rows, %n")
    for index in range(BUFFERS):
        text.line(f"%buffer{index} = memref.reinterpret_cast %buffer{index}_start to offset: [0], sizes: [{elements}], "
                  f"strides: [1] : memref<1xf32> to {BUFFER_TYPE}")
    slot_elements = text.index("arith.muli %block, %n")
    scratch_elements = text.index(f"arith.muli %scratch_slots, {slot_elements}")
    text.line(f"%scratch = memref.alloca({scratch_elements}) {{alignment = 64 : i64}} : {BUFFER_TYPE}")
    for table in ("slot_buffer", "slot_offset", "slot_stride"):
        text.line(f"%{table} = memref.alloca() : memref<{SLOTS}xindex>")
    slot = text.loop(SLOTS, "s")
    text.store(text.constant(BUFFERS), "%slot_buffer", f"memref<{SLOTS}xindex>", [slot])
    text.store(text.index(f"arith.muli {slot}, {slot_elements}"), "%slot_offset", f"memref<{SLOTS}xindex>", [slot])
    text.store("%n", "%slot_stride", f"memref<{SLOTS}xindex>", [slot])
    text.close()
    first_row = text.fresh("r")
    text.open(f"scf.for {first_row} = {text.constant(0)} to %rows step %block")
    block_rows = text.index(f"arith.minsi %block, {text.index(f'arith.subi %rows, {first_row}')}")
    instruction = text.loop("%count", "i")
    start = text.index(f"arith.muli {instruction}, {text.constant(WORDS)}")
    fields = []
    for word in range(WORDS):
        at = text.index(f"arith.addi {start}, {text.constant(word)}")
        fields.append(text.value(f"memref.load %program[{at}] : memref<?xi64>"))
    opcode, d, a, b, c, p, q = (text.value(f"arith.index_cast {field} : i64 to index") for field in fields[:7])
    immediate = fields[7]
    slots = [slot_of(text, index) for index in (d, a, b, c, p, q)]
    cases = instruction_cases(text, symbol, d, slots, immediate, first_row, block_rows)
    text.switch(f"scf.index_switch {opcode}", [(code, lambda emit=emit: (emit(), text.line("scf.yield"))) for code, emit in cases]
                + [("default", lambda: text.line("scf.yield"))])
    text.close()
    text.close()
    functions = [case_function(f"{symbol}_{code}", name) for name, code in OPCODES.items() if name not in LOADS]
    return "\n".join([text.text(), *functions])


def slot_of(text: EngineText, index: str) -> Slot:
    tables = [text.value(f"memref.load %{table}[{index}] : memref<{SLOTS}xindex>") for table in ("slot_buffer", "slot_offset", "slot_stride")]
    return Slot(buffer_of(text, tables[0]), tables[1], tables[2])


def instruction_cases(text: EngineText, symbol: str, d_index: str, slots: list[Slot], immediate: str, first_row: str,
                      block_rows: str) -> list:
    """(opcode, emit the case's body) for every instruction: a load's in the engine's
    function, any other a call of its own function (`case_function`)."""
    d = slots[0]
    arguments = [part for slot in slots for part in (as_pointer(text, slot.memref), slot.offset, slot.stride)] + [block_rows, "%n"]
    types = ", ".join(["memref<1xf32>", "index", "index"] * len(slots) + ["index", "index"])
    cases = []
    for name, code in OPCODES.items():
        if name in LOADS:
            cases.append((code, lambda name=name: load(text, name, d_index, d, immediate, first_row, block_rows)))
        else:
            cases.append((code, lambda code=code: text.line(f"func.call @{symbol}_{code}({', '.join(arguments)}) : ({types}) -> ()")))
    return cases


def as_pointer(text: EngineText, memref: str) -> str:
    return text.value(f"memref.reinterpret_cast {memref} to offset: [0], sizes: [1], strides: [1] : {BUFFER_TYPE} to memref<1xf32>")


CASE_SLOTS = ("d", "a", "b", "c", "shift", "scale")


def case_function(symbol: str, name) -> str:
    """The function running instruction `name` over one block (its slots' memrefs, offsets
    and strides, the block's rows, n): one per instruction and not inlined, so that LLVM
    optimizes many small functions (one function of all of them took it seconds)."""
    arguments = [(f"{slot}{part}", kind) for slot in CASE_SLOTS for part, kind in (("_start", "memref<1xf32>"), ("_offset", "index"), ("_stride", "index"))]
    text = EngineText(symbol, arguments + [("block_rows", "index"), ("n", "index")])
    slots = []
    for slot in CASE_SLOTS:
        text.line(f"%{slot} = memref.reinterpret_cast %{slot}_start to offset: [0], sizes: [%n], strides: [1] : memref<1xf32> to {BUFFER_TYPE}")
        slots.append(Slot(f"%{slot}", f"%{slot}_offset", f"%{slot}_stride"))
    d, a, b, c, *slots_of_transform = slots
    transform = slots_of_transform if name[-1] is True else None
    block_rows = "%block_rows"
    if name == "broadcast_rows":
        each_row(text, block_rows, [d, a], lambda t, p, row, values: values[1])
    elif name[0] == "reduce":
        reduce(text, name[1], d, [a], transform, block_rows)
    elif name[0] == "reduce_product":
        reduce(text, name[1], d, [a, b], transform, block_rows, product=True)
    elif name[0] == "chain":
        chain(text, name[1:4], [d, a, b, c], transform, block_rows)
    elif name[0] == "unary_rows":
        each_row(text, block_rows, [d, a], lambda t, position, row, values: unary(text, name[1], values[1], t), [False, False], transform)
    elif name[0] == "unary_per_row":
        per_row_op(text, block_rows, [d, a], lambda t, values: unary(text, name[1], values[0], t))
    else:
        binary_case(text, name[1], name[2], d, a, b, transform, block_rows)
    return text.text()


def cases_kept_apart(llvm_ir: str, symbol: str) -> str:
    """The engine's LLVM IR with its instructions' functions internal and never inlined (the
    MLIR lowering keeps neither attribute)."""
    return re.sub(rf"^define void @({re.escape(symbol)}_\d+)\((.*)\) {{$", r"define internal void @\1(\2) noinline {", llvm_ir, flags=re.MULTILINE)


def unary(text: EngineText, op: str, x: str, value_type: str) -> str:
    return x if op == "copy" else text.value(UNARY[op].format(x=x, t=value_type))


def binary(text: EngineText, op: str, x: str, y: str, value_type: str) -> str:
    return text.value(f"{BINARY[op]} {x}, {y} : {value_type}")


def load(text: EngineText, name: str, d_index: str, d: Slot, immediate: str, first_row: str, block_rows: str) -> None:
    """Point slot d into buffer `immediate` at the block's rows (a per-column vector: at its
    start, stride 0; per-row values: at the block's first row's), or fill it with the block's
    copies of a scalar (an operand's, or the immediate's f32 bits)."""
    if name in ("load_scalar", "splat"):
        if name == "splat":
            value = text.value(f"arith.bitcast {text.value(f'arith.trunci {immediate} : i64 to i32')} : i32 to f32")
        else:
            memref = buffer_of(text, text.value(f"arith.index_cast {immediate} : i64 to index"))
            value = text.value(f"memref.load {memref}[{text.constant(0)}] : {BUFFER_TYPE}")
        text.vector_loop(block_rows, lambda position, t: text.write(text.splat(value, t), d.memref, d.offset, position, t))
        return
    if name == "load_rows":
        offset, stride = text.index(f"arith.muli {first_row}, %n"), "%n"
    elif name == "load_columns":
        offset, stride = text.constant(0), text.constant(0)
    else:
        offset, stride = first_row, text.constant(1)
    table = f"memref<{SLOTS}xindex>"
    text.store(text.value(f"arith.index_cast {immediate} : i64 to index"), "%slot_buffer", table, [d_index])
    text.store(offset, "%slot_offset", table, [d_index])
    text.store(stride, "%slot_stride", table, [d_index])


def buffer_of(text: EngineText, buffer: str) -> str:
    """The memref of buffer number `buffer` (BUFFERS: the scratch)."""
    memref = text.fresh("m")
    cases = [(index, lambda index=index: text.line(f"scf.yield %buffer{index} : {BUFFER_TYPE}")) for index in range(BUFFERS)]
    text.switch(f"{memref} = scf.index_switch {buffer} -> {BUFFER_TYPE}",
                cases + [("default", lambda: text.line(f"scf.yield %scratch : {BUFFER_TYPE}"))])
    return memref


def per_row_op(text: EngineText, block_rows: str, slots: list[Slot], compute) -> None:
    """d = compute(operands) over the block's per-row values."""

    def body(position, value_type):
        values = [text.read(slot.memref, slot.offset, position, value_type) for slot in slots[1:]]
        text.write(compute(value_type, values), slots[0].memref, slots[0].offset, position, value_type)

    text.vector_loop(block_rows, body)


def each_row(text: EngineText, block_rows: str, slots: list[Slot], compute, per_row=None, transform=None) -> None:
    """Row by row: d's row = compute(type, position, row, values) where `values` holds each
    operand's element (rows) or the row's value (per-row; `per_row` says which are); a's
    elements (when rows) through the instruction's `transform`."""
    per_row = per_row or [False] + [True] * (len(slots) - 1)
    row = text.loop(block_rows, "r")
    shift, scale = row_transform(text, transform, row) if transform and not per_row[1] else (None, None)
    offsets, scalars = [], []
    for slot, is_per_row in zip(slots, per_row):
        if is_per_row:
            at = text.index(f"arith.addi {slot.offset}, {row}")
            scalars.append(text.value(f"memref.load {slot.memref}[{at}] : {BUFFER_TYPE}"))
            offsets.append(None)
        else:
            scalars.append(None)
            offsets.append(text.index(f"arith.addi {slot.offset}, {text.index(f'arith.muli {row}, {slot.stride}')}"))

    def body(position, value_type):
        values = [text.splat(scalar, value_type) if offset is None else text.read(slot.memref, offset, position, value_type)
                  for slot, offset, scalar in zip(slots, offsets, scalars)]
        if shift is not None:
            values[1] = transformed(text, values[1], shift, scale, value_type)
        text.write(compute(value_type, position, row, values), slots[0].memref, offsets[0], position, value_type)

    text.vector_loop("%n", body)
    text.close()


def binary_case(text: EngineText, op: str, variant: str, d: Slot, a: Slot, b: Slot, transform: list[Slot], block_rows: str) -> None:
    if variant == "per_row_per_row":
        per_row_op(text, block_rows, [d, a, b], lambda t, values: binary(text, op, *values, t))
    else:
        per_row = [False, variant == "per_row_rows", variant == "rows_per_row"]
        each_row(text, block_rows, [d, a, b], lambda t, position, row, values: binary(text, op, values[1], values[2], t), per_row, transform)


def row_transform(text: EngineText, transform: list[Slot], row: str) -> tuple[str, str]:
    """The row's shift and scale (per-row values) of the instruction's transform."""
    return tuple(text.value(f"memref.load {slot.memref}[{text.index(f'arith.addi {slot.offset}, {row}')}] : {BUFFER_TYPE}")
                 for slot in transform)


def transformed(text: EngineText, value: str, shift: str, scale: str, value_type: str) -> str:
    """(value - shift) * scale: exact for the identity's 0 and 1."""
    shifted = text.value(f"arith.subf {value}, {text.splat(shift, value_type)} : {value_type}")
    return text.value(f"arith.mulf {shifted}, {text.splat(scale, value_type)} : {value_type}")


def reduce(text: EngineText, combiner: str, d: Slot, operands: list[Slot], transform: list[Slot], block_rows: str, product: bool = False) -> None:
    """d's value of each row: the combination of a's row (of the product of a's and b's with
    `product`): four vectors of 16 partial results, then one, then the tail (independent
    partial results, so that the reduction runs at the adds' throughput, not their latency)."""
    identity, kind = REDUCTIONS[combiner]
    flags = " fastmath<reassoc>" if combiner == "xhlo.add" else ""
    row = text.loop(block_rows, "r")
    offsets = [text.index(f"arith.addi {slot.offset}, {text.index(f'arith.muli {row}, {slot.stride}')}") for slot in operands]
    shift, scale = row_transform(text, transform, row) if transform else (None, None)

    def element(position: str, value_type: str) -> str:
        values = [text.read(slot.memref, offset, position, value_type) for slot, offset in zip(operands, offsets)]
        if shift is not None:
            values = [transformed(text, value, shift, scale, value_type) for value in values]
        return text.value(f"arith.mulf {values[0]}, {values[1]} : {value_type}") if product else values[0]

    def combine(x: str, y: str, value_type: str) -> str:
        return text.value(f"{BINARY[combiner]} {x}, {y}{flags} : {value_type}")

    unrolled = text.index(f"arith.subi %n, {text.index(f'arith.remui %n, {text.constant(UNROLL * WIDTH)}')}")
    whole = text.index(f"arith.subi %n, {text.index(f'arith.remui %n, {text.constant(WIDTH)}')}")
    start = text.splat(text.constant(identity, "f32"), VECTOR)
    position, carried, partial = text.fresh("c"), [text.fresh("a") for _ in range(UNROLL)], text.fresh("a")
    text.open(f"{partial}:{UNROLL} = scf.for {position} = {text.constant(0)} to {unrolled} step {text.constant(UNROLL * WIDTH)} "
              f"iter_args({', '.join(f'{name} = {start}' for name in carried)}) -> ({', '.join([VECTOR] * UNROLL)})")
    combined = [combine(name, element(text.index(f"arith.addi {position}, {text.constant(part * WIDTH)}"), VECTOR), VECTOR)
                for part, name in enumerate(carried)]
    text.line(f"scf.yield {', '.join(combined)} : {', '.join([VECTOR] * UNROLL)}")
    text.close()
    partials = [f"{partial}#{part}" for part in range(UNROLL)]
    while len(partials) > 1:
        partials = [combine(partials[i], partials[i + 1], VECTOR) for i in range(0, len(partials), 2)]
    position, carried, vector = text.fresh("c"), text.fresh("a"), text.fresh("a")
    text.open(f"{vector} = scf.for {position} = {unrolled} to {whole} step {text.constant(WIDTH)} iter_args({carried} = {partials[0]}) -> ({VECTOR})")
    text.line(f"scf.yield {combine(carried, element(position, VECTOR), VECTOR)} : {VECTOR}")
    text.close()
    # the rest of the row as one masked vector, the lanes past it the identity
    text.masked(text.index(f"arith.subi %n, {whole}"), None)
    tail = text.value(f"arith.select {text.mask}, {element(whole, VECTOR)}, {start} : vector<{WIDTH}xi1>, {VECTOR}")
    text.mask = None
    total = text.value(f"vector.reduction <{kind}>, {combine(vector, tail, VECTOR)}{flags} : {VECTOR} into f32")
    text.store(total, d.memref, BUFFER_TYPE, [text.index(f"arith.addi {d.offset}, {row}")])
    text.close()


def chain(text: EngineText, ops: tuple, slots: list[Slot], transform: list[Slot], block_rows: str) -> None:
    """d's rows = (a first b) second c, a rows, b and c as `kinds` says."""
    first, second, kinds = ops
    per_row = [False, False, kinds.startswith("per_row"), kinds.endswith("per_row")]
    each_row(text, block_rows, slots, lambda t, position, row, values: binary(text, second, binary(text, first, values[1], values[2], t), values[3], t),
             per_row, transform)

