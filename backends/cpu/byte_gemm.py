"""Byte GEMMs on VNNI: a dot of int8 (or uint8) rows by int8 columns into int32 as the runtime
library's GEMM built on `vpdpbusd` (XLA:CPU hands such dots to YNNPACK's int8 kernels).

`vpdpbusd` adds to each 32-bit lane of an accumulator the four products of that lane's
unsigned bytes of one operand and signed bytes of the other: sixty-four multiply-adds a
512-bit instruction, where the f32 GEMM the dot otherwise becomes (`integer_dot_as_float.py`)
does sixteen, after widening both operands. A uint8 lhs is the unsigned side as it is. An
int8 lhs is the signed side, each row's four bytes broadcast straight from memory, against a
rhs whose sign bits the packing flipped (`b + 128`); 128 times each lhs row's sum, taken
first, comes off its results. (Flipping the lhs instead cost an integer xor and a broadcast
from a register per row and step, on the port the products need: 230-245 against 305-330
GMAC/s on one core.) Every sum is then the integer dot's, wrapping as XLA's int32 sums wrap,
for any length of the contracting dimension.

A kernel of the dot runs in slices of the output's columns on the threads, each slice in two
calls into the runtime library. `mlirxla_pack_bytes_vnni` packs the slice's columns of the
right operand into the thread's scratch: panels of 16 columns, each a run of 64-byte blocks,
one per four rows of k, lane j holding the four bytes of column j (zeros past k and n).
`mlirxla_byte_gemm_vnni` then runs over the left operand's rows for each pair of panels (32
columns; a pair of k = 1024 is 32 KiB, in a core's L1 cache), keeping 8 rows x 2 panels of
int32 accumulators in registers, and stores the lanes inside n through a mask. Rows past a
multiple of 8 and an odd last panel take smaller blocks of the same code. Slicing the columns
rather than the rows spreads the packing over the threads too and keeps a batch of a few
rows (inference) parallel.

Taken for a dot that is one GEMM (no batch) whose left operand is not transposed, on a host
with `avx512_vnni`; elsewhere the dot stays a float GEMM or a generated loop nest."""

from mlirxla.mlir import ir
from mlirxla.runtime.llvm_host import has_feature

PACK = "mlirxla_pack_bytes_vnni"
GEMM = "mlirxla_byte_gemm_vnni"
FUNCTIONS = (PACK, GEMM)
LANES = 16  # int32 lanes of a 512-bit register: a panel's columns
BLOCK_BYTES = 64  # one panel's block of four rows of k
ROWS = 8  # the register block's rows (8 x 2 accumulators, 2 panels, 8 broadcasts)
VECTOR = "<16 x i32>"
DPBUSD = "llvm.x86.avx512.vpdpbusd.512"
DECLARATIONS = [
    f"declare {VECTOR} @{DPBUSD}({VECTOR}, {VECTOR}, {VECTOR})",
    f"declare void @llvm.masked.store.v16i32.p0({VECTOR}, ptr, i32, <16 x i1>)",
]
LANE_INDICES = "<i32 " + ", i32 ".join(str(lane) for lane in range(LANES)) + ">"


def available() -> bool:
    """Whether this host has `vpdpbusd` on 512-bit registers."""
    return has_feature("avx512vnni")


def packed_bytes(n: int, k: int) -> int:
    """The packed right operand of k x n: a block of 4 rows x 16 columns for each."""
    return -(-n // LANES) * -(-k // 4) * BLOCK_BYTES


class Text:
    """LLVM IR of one function, written in order; loop counters live in stack slots, which
    O3 promotes to registers (the library is compiled once per host)."""

    def __init__(self, signature: str):
        self.lines = [f"define void {signature} {{", "entry:"]
        self.at_entry = len(self.lines)

    def line(self, text: str) -> None:
        self.lines.append(f"  {text}")

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:")

    def slot(self, name: str, kind: str) -> str:
        self.lines.insert(self.at_entry, f"  %{name} = alloca {kind}, align 64")
        self.at_entry += 1
        return f"%{name}"

    def loop(self, name: str, start: str, end: str, step: int, body) -> None:
        """for (%name = start; %name < end; %name += step) body()."""
        slot = self.slot(f"{name}.slot", "i64")
        self.line(f"store i64 {start}, ptr {slot}")
        self.line(f"br label %{name}.head")
        self.label(f"{name}.head")
        self.line(f"%{name} = load i64, ptr {slot}")
        self.line(f"%{name}.more = icmp slt i64 %{name}, {end}")
        self.line(f"br i1 %{name}.more, label %{name}.body, label %{name}.end")
        self.label(f"{name}.body")
        body()
        self.line(f"%{name}.next = add i64 %{name}, {step}")
        self.line(f"store i64 %{name}.next, ptr {slot}")
        self.line(f"br label %{name}.head")
        self.label(f"{name}.end")

    def when(self, name: str, condition: str, body) -> None:
        self.line(f"br i1 {condition}, label %{name}.then, label %{name}.join")
        self.label(f"{name}.then")
        body()
        self.line(f"br label %{name}.join")
        self.label(f"{name}.join")

    def text(self) -> str:
        return "\n".join(DECLARATIONS + [""] + self.lines + ["  ret void", "}", ""])


def splat(text: Text, name: str, scalar: str) -> str:
    text.line(f"%{name}.one = insertelement {VECTOR} poison, i32 {scalar}, i64 0")
    text.line(f"%{name} = shufflevector {VECTOR} %{name}.one, {VECTOR} poison, <16 x i32> zeroinitializer")
    return f"%{name}"


def pack_text() -> str:
    """(rhs, packed, k, n, row stride, column stride, flip): element (r, j) of the rhs at
    rhs[r * row stride + j * column stride], its bytes' sign bits flipped when `flip` is 1
    (int8 + 128 as uint8). Blocks of full rows and columns of a row-major rhs interleave four
    16-byte rows; of a transposed one gather 16 words; the others (past k or n) are written a
    byte at a time, zeros outside (which the products never read: the lhs' bytes past k are
    zeros, the lanes past n are not stored)."""
    text = Text(f"@{PACK}(ptr noalias readonly %rhs, ptr noalias %packed, i64 %k, i64 %n, i64 %row_stride, i64 %column_stride, "
                "i64 %flip)")
    text.line("%k_plus = add i64 %k, 3")
    text.line("%groups = lshr i64 %k_plus, 2")
    text.line("%n_plus = add i64 %n, 15")
    text.line("%panels = lshr i64 %n_plus, 4")
    text.line(f"%panel_bytes = mul i64 %groups, {BLOCK_BYTES}")
    text.line("%row_major = icmp eq i64 %column_stride, 1")
    text.line("%column_major = icmp eq i64 %row_stride, 1")
    text.line("%flipped = icmp ne i64 %flip, 0")
    text.line("%flip_word = select i1 %flipped, i32 -2139062144, i32 0")  # 0x80808080
    flips = splat(text, "flips", "%flip_word")

    def panel():
        text.line("%panel_offset = mul i64 %p, %panel_bytes")
        text.line("%panel_start = getelementptr i8, ptr %packed, i64 %panel_offset")
        text.line("%column0 = shl i64 %p, 4")
        text.line("%column_end = add i64 %column0, 16")
        text.line("%full_columns = icmp sle i64 %column_end, %n")
        text.loop("q", "0", "%groups", 1, group)

    def group():
        text.line(f"%block_offset = mul i64 %q, {BLOCK_BYTES}")
        text.line("%block = getelementptr i8, ptr %panel_start, i64 %block_offset")
        text.line("%row0 = shl i64 %q, 2")
        text.line("%row_end = add i64 %row0, 4")
        text.line("%full_rows = icmp sle i64 %row_end, %k")
        text.line("%full = and i1 %full_columns, %full_rows")
        text.line("%interleave = and i1 %full, %row_major")
        text.line("%gather = and i1 %full, %column_major")
        text.line("%fast = or i1 %interleave, %gather")
        text.line("%slow = xor i1 %fast, true")
        text.when("interleaved", "%interleave", interleaved)
        text.when("gathered", "%gather", gathered)
        text.when("bytewise", "%slow", bytewise)
        text.line(f"%packed_block = load {VECTOR}, ptr %block, align 4")
        text.line(f"%flipped_block = xor {VECTOR} %packed_block, {flips}")
        text.line(f"store {VECTOR} %flipped_block, ptr %block, align 4")

    def interleaved():
        for t in range(4):
            text.line(f"%i_row{t} = add i64 %row0, {t}")
            text.line(f"%i_row_offset{t} = mul i64 %i_row{t}, %row_stride")
            text.line(f"%i_offset{t} = add i64 %i_row_offset{t}, %column0")
            text.line(f"%i_at{t} = getelementptr i8, ptr %rhs, i64 %i_offset{t}")
            text.line(f"%i_bytes{t} = load <16 x i8>, ptr %i_at{t}, align 1")
        low = ", ".join(f"i32 {i}" for i in range(32))
        text.line(f"%i_low = shufflevector <16 x i8> %i_bytes0, <16 x i8> %i_bytes1, <32 x i32> <{low}>")
        text.line(f"%i_high = shufflevector <16 x i8> %i_bytes2, <16 x i8> %i_bytes3, <32 x i32> <{low}>")
        # lane j's bytes t = 0..3: rows 0 and 1 from the low half (j, 16 + j), 2 and 3 from the high
        mask = ", ".join(f"i32 {(t // 2) * 32 + (t % 2) * 16 + j}" for j in range(LANES) for t in range(4))
        text.line(f"%i_block = shufflevector <32 x i8> %i_low, <32 x i8> %i_high, <64 x i32> <{mask}>")
        text.line("store <64 x i8> %i_block, ptr %block, align 4")

    def gathered():
        text.line("%g_first = mul i64 %column0, %column_stride")
        text.line("%g_start = add i64 %g_first, %row0")
        text.line("%g_base = getelementptr i8, ptr %rhs, i64 %g_start")
        for lane in range(LANES):
            text.line(f"%g_offset{lane} = mul i64 {lane}, %column_stride")
            text.line(f"%g_at{lane} = getelementptr i8, ptr %g_base, i64 %g_offset{lane}")
            text.line(f"%g_word{lane} = load i32, ptr %g_at{lane}, align 1")
            previous = "poison" if lane == 0 else f"%g_vector{lane - 1}"
            text.line(f"%g_vector{lane} = insertelement {VECTOR} {previous}, i32 %g_word{lane}, i64 {lane}")
        text.line(f"store {VECTOR} %g_vector{LANES - 1}, ptr %block, align 4")

    def bytewise():
        text.loop("l", "0", "16", 1, lambda: text.loop("t", "0", "4", 1, byte))

    def byte():
        text.line("%b_row = add i64 %row0, %t")
        text.line("%b_column = add i64 %column0, %l")
        text.line("%b_row_inside = icmp slt i64 %b_row, %k")
        text.line("%b_column_inside = icmp slt i64 %b_column, %n")
        text.line("%b_inside = and i1 %b_row_inside, %b_column_inside")
        text.line("%b_lane_offset = shl i64 %l, 2")
        text.line("%b_offset = add i64 %b_lane_offset, %t")
        text.line("%b_at = getelementptr i8, ptr %block, i64 %b_offset")
        text.line("store i8 0, ptr %b_at")
        text.when("b_copy", "%b_inside", lambda: (
            text.line("%b_row_offset = mul i64 %b_row, %row_stride"),
            text.line("%b_column_offset = mul i64 %b_column, %column_stride"),
            text.line("%b_source_offset = add i64 %b_row_offset, %b_column_offset"),
            text.line("%b_source = getelementptr i8, ptr %rhs, i64 %b_source_offset"),
            text.line("%b_value = load i8, ptr %b_source"),
            text.line("store i8 %b_value, ptr %b_at")))

    text.loop("p", "0", "%panels", 1, panel)
    return text.text()


def gemm_text() -> str:
    """(lhs, packed, row sums, output, m, n, k, lhs row stride, output row stride, signed lhs):
    the output's m x n int32 = lhs (m x k bytes) times the packed rhs. An int8 lhs is the
    signed operand of `vpdpbusd`, broadcast straight from memory, against a rhs packed with
    its sign bits flipped (`b + 128`); the lhs' row sums, taken first into `row sums`, times
    128 come off. A uint8 lhs is the unsigned operand against the rhs as it is."""
    text = Text(f"@{GEMM}(ptr noalias readonly %lhs, ptr noalias readonly %packed, ptr noalias %row_sums, ptr noalias %out, "
                "i64 %m, i64 %n, i64 %k, i64 %lda, i64 %ldc, i64 %signed)")
    text.line("%whole_groups = lshr i64 %k, 2")
    text.line("%rest = and i64 %k, 3")
    text.line("%has_rest = icmp ne i64 %rest, 0")
    text.line("%k_plus = add i64 %k, 3")
    text.line("%groups = lshr i64 %k_plus, 2")
    text.line("%n_plus = add i64 %n, 15")
    text.line("%panels = lshr i64 %n_plus, 4")
    text.line("%pairs = lshr i64 %panels, 1")
    text.line("%odd_panel = and i64 %panels, 1")
    text.line("%has_odd_panel = icmp ne i64 %odd_panel, 0")
    text.line(f"%panel_bytes = mul i64 %groups, {BLOCK_BYTES}")
    text.line("%is_signed = icmp ne i64 %signed, 0")
    text.line("%is_unsigned = xor i1 %is_signed, true")
    text.line(f"%odd_rows = urem i64 %m, {ROWS}")
    text.line("%block_rows = sub i64 %m, %odd_rows")
    tail_word = text.slot("tail_word", "i32")
    row_sum = text.slot("row_sum", "i32")

    def sum_row():
        text.line(f"store i32 0, ptr {row_sum}")
        text.line("%sum_row_offset = mul i64 %sum_i, %lda")
        text.line("%sum_row = getelementptr i8, ptr %lhs, i64 %sum_row_offset")
        text.loop("sum_j", "0", "%k", 1, lambda: (
            text.line("%sum_at = getelementptr i8, ptr %sum_row, i64 %sum_j"),
            text.line("%sum_byte = load i8, ptr %sum_at"),
            text.line("%sum_value = sext i8 %sum_byte to i32"),
            text.line(f"%sum_old = load i32, ptr {row_sum}"),
            text.line("%sum_new = add i32 %sum_old, %sum_value"),
            text.line(f"store i32 %sum_new, ptr {row_sum}")))
        text.line(f"%sum_total = load i32, ptr {row_sum}")
        text.line("%sum_slot_at = getelementptr i32, ptr %row_sums, i64 %sum_i")
        text.line("store i32 %sum_total, ptr %sum_slot_at")

    def kernel(rows: int, panels: int, first_panel: str, tag: str, signed: bool):
        """Rows %<tag>i ... + rows of panels first_panel ... + panels."""
        i = f"%{tag}i"
        accumulators = [[text.slot(f"{tag}acc{r}_{c}", VECTOR) for c in range(panels)] for r in range(rows)]
        for row in accumulators:
            for slot in row:
                text.line(f"store {VECTOR} zeroinitializer, ptr {slot}")
        for c in range(panels):
            text.line(f"%{tag}panel{c} = add i64 {first_panel}, {c}")
            text.line(f"%{tag}panel_offset{c} = mul i64 %{tag}panel{c}, %panel_bytes")
            text.line(f"%{tag}b{c} = getelementptr i8, ptr %packed, i64 %{tag}panel_offset{c}")
        for r in range(rows):
            text.line(f"%{tag}row{r} = add i64 {i}, {r}")
            text.line(f"%{tag}row_offset{r} = mul i64 %{tag}row{r}, %lda")
            text.line(f"%{tag}a{r} = getelementptr i8, ptr %lhs, i64 %{tag}row_offset{r}")

        def step(group: str, q: str, words):
            text.line(f"%{tag}{group}block = mul i64 {q}, {BLOCK_BYTES}")
            for c in range(panels):
                text.line(f"%{tag}{group}b_at{c} = getelementptr i8, ptr %{tag}b{c}, i64 %{tag}{group}block")
                text.line(f"%{tag}{group}bv{c} = load {VECTOR}, ptr %{tag}{group}b_at{c}, align 4")
            for r in range(rows):
                broadcast = splat(text, f"{tag}{group}av{r}", words(r))
                for c in range(panels):
                    name = f"%{tag}{group}acc{r}_{c}"
                    unsigned, signed_bytes = (f"%{tag}{group}bv{c}", broadcast) if signed else (broadcast, f"%{tag}{group}bv{c}")
                    text.line(f"{name} = load {VECTOR}, ptr {accumulators[r][c]}")
                    text.line(f"{name}.new = call {VECTOR} @{DPBUSD}({VECTOR} {name}, {VECTOR} {unsigned}, {VECTOR} {signed_bytes})")
                    text.line(f"store {VECTOR} {name}.new, ptr {accumulators[r][c]}")

        def whole_group():
            text.line(f"%{tag}byte = shl i64 %{tag}q, 2")

            def word(r):
                text.line(f"%{tag}a_at{r} = getelementptr i8, ptr %{tag}a{r}, i64 %{tag}byte")
                text.line(f"%{tag}word{r} = load i32, ptr %{tag}a_at{r}, align 1")
                return f"%{tag}word{r}"

            step("w", f"%{tag}q", word)

        def last_group():
            text.line(f"%{tag}tail_byte = shl i64 %whole_groups, 2")

            def word(r):
                text.line(f"store i32 0, ptr {tail_word}")
                text.loop(f"{tag}t{r}", "0", "%rest", 1, lambda: (
                    text.line(f"%{tag}t_at{r} = add i64 %{tag}tail_byte, %{tag}t{r}"),
                    text.line(f"%{tag}t_source{r} = getelementptr i8, ptr %{tag}a{r}, i64 %{tag}t_at{r}"),
                    text.line(f"%{tag}t_value{r} = load i8, ptr %{tag}t_source{r}"),
                    text.line(f"%{tag}t_target{r} = getelementptr i8, ptr {tail_word}, i64 %{tag}t{r}"),
                    text.line(f"store i8 %{tag}t_value{r}, ptr %{tag}t_target{r}")))
                text.line(f"%{tag}tword{r} = load i32, ptr {tail_word}")
                return f"%{tag}tword{r}"

            step("t", "%whole_groups", word)

        text.loop(f"{tag}q", "0", "%whole_groups", 1, whole_group)
        text.when(f"{tag}rest", "%has_rest", last_group)
        for c in range(panels):
            text.line(f"%{tag}column{c} = shl i64 %{tag}panel{c}, 4")
            text.line(f"%{tag}inside{c} = sub i64 %n, %{tag}column{c}")
            text.line(f"%{tag}inside32_{c} = trunc i64 %{tag}inside{c} to i32")
            bound = splat(text, f"{tag}bound{c}", f"%{tag}inside32_{c}")
            text.line(f"%{tag}mask{c} = icmp slt {VECTOR} {LANE_INDICES}, {bound}")
        for r in range(rows):
            text.line(f"%{tag}out_row{r} = mul i64 %{tag}row{r}, %ldc")
            if signed:
                text.line(f"%{tag}sum_at{r} = getelementptr i32, ptr %row_sums, i64 %{tag}row{r}")
                text.line(f"%{tag}sum{r} = load i32, ptr %{tag}sum_at{r}")
                text.line(f"%{tag}correction_word{r} = shl i32 %{tag}sum{r}, 7")
                correction = splat(text, f"{tag}correction{r}", f"%{tag}correction_word{r}")
            for c in range(panels):
                text.line(f"%{tag}total{r}_{c} = load {VECTOR}, ptr {accumulators[r][c]}")
                result = f"%{tag}total{r}_{c}"
                if signed:
                    text.line(f"%{tag}result{r}_{c} = sub {VECTOR} %{tag}total{r}_{c}, {correction}")
                    result = f"%{tag}result{r}_{c}"
                text.line(f"%{tag}out_offset{r}_{c} = add i64 %{tag}out_row{r}, %{tag}column{c}")
                text.line(f"%{tag}out_at{r}_{c} = getelementptr i32, ptr %out, i64 %{tag}out_offset{r}_{c}")
                text.line(f"call void @llvm.masked.store.v16i32.p0({VECTOR} {result}, ptr %{tag}out_at{r}_{c}, i32 4, "
                          f"<16 x i1> %{tag}mask{c})")

    def product(signed: bool):
        sign = "s" if signed else "u"

        def pair():
            text.line(f"%{sign}first = shl i64 %{sign}pair, 1")
            text.loop(f"{sign}xi", "0", "%block_rows", ROWS, lambda: kernel(ROWS, 2, f"%{sign}first", f"{sign}x", signed))
            text.loop(f"{sign}yi", "%block_rows", "%m", 1, lambda: kernel(1, 2, f"%{sign}first", f"{sign}y", signed))

        def last_panel():
            text.line(f"%{sign}last = sub i64 %panels, 1")
            text.loop(f"{sign}zi", "0", "%block_rows", ROWS, lambda: kernel(ROWS, 1, f"%{sign}last", f"{sign}z", signed))
            text.loop(f"{sign}vi", "%block_rows", "%m", 1, lambda: kernel(1, 1, f"%{sign}last", f"{sign}v", signed))

        text.loop(f"{sign}pair", "0", "%pairs", 1, pair)
        text.when(f"{sign}odd", "%has_odd_panel", last_panel)

    text.when("row_sums", "%is_signed", lambda: text.loop("sum_i", "0", "%m", 1, sum_row))
    text.when("signed", "%is_signed", lambda: product(True))
    text.when("unsigned", "%is_unsigned", lambda: product(False))
    return text.text()
