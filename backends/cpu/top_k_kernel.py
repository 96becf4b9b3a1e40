"""Top-k as a generated loop kernel: a sort (with one key) whose results only slices of its
first k positions read, which is what `lax.top_k` becomes (chlo.top_k decomposes into an
iota, a stable sort of (values, positions) descending and two slices).

Per row (every position of the dimensions other than the sort's) the kernel selects the
first k elements of the stable sort's order with a bounded insertion: the first k elements
are insertion-sorted into a k-entry buffer of (key, position); after that, an element enters
only when its key is strictly before the buffer's last key (a loop-carried threshold, so that
the common case is one load and one compare), shifting the entries after it down and
dropping the last. Keys equal to an entry's go after it: earlier positions first, which is
the stable sort's order. Then every operand's elements at the k selected positions are
written to the first k positions of its result, which is all the slices read (the rest of
the results are never written).

Keys compare as integers whose order is the comparator's (`sort_comparator.SortKey`), the
host sort's encoding (`runtime/host_calls.sortable`): floats' bits in IEEE total order
(-NaN < -inf < ... < -0 < +0 < ... < +NaN), after mapping -0 to +0 and every NaN to one
positive NaN when the comparator canonicalizes; integers widened to i64; descending keys
bitwise inverted.

Worth it for small k: the insertion moves at most k entries, so a row costs n compares plus
k shifts per element that enters (`MAX_SELECTED`); larger selections stay host calls. A
sort of short rows (at most `MAX_SELECTED`) whose results are read whole is the same kernel
with k = n: an insertion sort.

A `TopK` custom call (`transforms/top_k_rewriter.py`: the iota, the sort and the slices of
`lax.top_k` as one op) is the same selection on its one operand: positions are the loop's
own, and the k values and positions are written to k-wide results (`top_k_call_text`)."""

import re
from dataclasses import dataclass

from mlirxla.mlir import ir
from mlirxla.transforms.sort_comparator import SortKey, comparator_keys
from mlirxla.transforms.top_k_rewriter import MAX_K

from .emitters.host_calls import leading_positions_read
from .loop_text import LoopText, element_text, is_float, is_unsigned, memref_text

MAX_SELECTED = MAX_K  # the TopK rewriter's bound is this kernel's
ROW_LANES = 32  # a GPU's threads a row when its rows hold at least this many times k (`select_by_lanes`)
LANES = 8  # keys compared at once past the first k of a contiguous row
CONTIGUOUS = re.compile(r"memref<[0-9?x]+x[a-z0-9]+>$")  # no layout: rows are contiguous
CANONICAL_NAN = {"f16": "0x7E00", "bf16": "0x7FC0", "f32": "0x7FC00000", "f64": "0x7FF8000000000000"}
FLOAT_BITS = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}
NEGATIVE_INFINITY = {"f32": "0xFF800000", "f64": "0xFFF0000000000000"}
POSITIVE_INFINITY = {"f32": "0x7F800000", "f64": "0x7FF0000000000000"}
FLOAT_FILTERED = ("f32", "f64")  # keys `scan_chunks` compares as floats
# four AVX-512 registers of them per test and branch (one register per branch: a 512x4096 TopK
# ran 1.1x slower); 64 f32 lanes are one i64 mask of the lanes to look at
FLOAT_CHUNK_BYTES = 256
SHORT_BUFFER = 16  # a library TopK of k up to this shifts this many entries per insertion, not MAX_SELECTED
SEGMENTS = 16  # lanes of `segment_bound`'s running extremes: a bound for k up to this many


def selected_count(op: ir.Operation) -> int | None:
    """k, when this sort is a top-k the kernel selects (a whole sort of rows of at most
    `MAX_SELECTED` is one with k = n), else None."""
    keys = comparator_keys(op)
    if keys is None or len(keys) != 1 or keys[0].part != "value":
        return None
    dimension = ir.IntegerAttr(op.attributes["dimension"]).value
    leading = leading_positions_read(op, dimension) or ir.RankedTensorType(op.operands[0].type).shape[dimension]
    if not 0 < leading <= MAX_SELECTED:
        return None
    element = ir.RankedTensorType(op.operands[keys[0].operand].type).element_type
    if not (isinstance(element, ir.IntegerType) or str(element) in FLOAT_BITS):
        return None  # complex keys, and the 8-bit and 4-bit floats, sort on the host
    return leading


def sortable(text: LoopText, value: str, tensor_type: ir.Type, canonical: bool, descending: bool, lanes: int | None = None) -> str:
    """`value` as an i64 whose signed order is the key's order (with `lanes`: a vector of that
    many keys, the same arithmetic lane by lane)."""
    element = element_text(tensor_type)

    def typed(scalar: str) -> str:
        return scalar if lanes is None else f"vector<{lanes}x{scalar}>"

    def constant(value, scalar: str) -> str:
        return text.constant(value, scalar) if lanes is None else text.constant(f"dense<{value}>", typed(scalar))

    if is_float(element):
        bits = FLOAT_BITS[element]
        if canonical:
            zero = constant("0.0", element)
            is_zero = text.value(f"arith.cmpf oeq, {value}, {zero} : {typed(element)}")
            value = text.value(f"arith.select {is_zero}, {zero}, {value} : {typed('i1')}, {typed(element)}")
            is_nan = text.value(f"arith.cmpf uno, {value}, {value} : {typed(element)}")
            value = text.value(f"arith.select {is_nan}, {constant(CANONICAL_NAN[element], element)}, {value} : {typed('i1')}, {typed(element)}")
        integer = f"i{bits}"
        raw = text.value(f"arith.bitcast {value} : {typed(element)} to {typed(integer)}")
        sign = text.value(f"arith.shrsi {raw}, {constant(bits - 1, integer)} : {typed(integer)}")
        magnitude = text.value(f"arith.andi {sign}, {constant((1 << (bits - 1)) - 1, integer)} : {typed(integer)}")
        ordered = text.value(f"arith.xori {raw}, {magnitude} : {typed(integer)}")
        wide = ordered if bits == 64 else text.value(f"arith.extsi {ordered} : {typed(integer)} to {typed('i64')}")
    elif element == "i64":
        wide = value if not is_unsigned(tensor_type) else text.value(f"arith.xori {value}, {constant(-(1 << 63), 'i64')} : {typed('i64')}")
    else:
        extend = "arith.extui" if is_unsigned(tensor_type) or element == "i1" else "arith.extsi"
        wide = text.value(f"{extend} {value} : {typed(element)} to {typed('i64')}")
    return text.value(f"arith.xori {wide}, {constant(-1, 'i64')} : {typed('i64')}") if descending else wide


def top_k_module_text(symbol: str, op: ir.Operation, k: int, parallel_rows: bool = False) -> str:
    """The selection kernel of a sort: the sort's operands -> its results, the first k
    positions of each row (`select`'s `parallel_rows`: a GPU's form)."""
    key = comparator_keys(op)[0]
    memrefs = [memref_text(v.type) for v in op.operands]
    text = LoopText(symbol, [(f"in{i}", t) for i, t in enumerate(memrefs)] + [(f"out{i}", t) for i, t in enumerate(memrefs)])

    def gather(at, rank: str, chosen: str) -> None:
        for i, memref_type in enumerate(memrefs):
            text.store(text.load(f"%in{i}", memref_type, at(chosen)), f"%out{i}", memref_type, at(rank))

    select(text, op.operands[key.operand].type, f"%in{key.operand}", ir.IntegerAttr(op.attributes["dimension"]).value,
           k, key, gather, parallel_rows=parallel_rows)
    return text.text()


def top_k_call_text(symbol: str, op: ir.Operation, leading: int | None = None, parallel_rows: bool = False) -> str:
    """The kernel of a `TopK` custom call (`transforms/top_k_rewriter.py`): x -> the k largest
    (or smallest) of each last-dimension row and their positions, both k wide; with `leading`,
    for a block of that many of the leading dimension's rows (`parallel_rows`: a GPU's form)."""
    operand, values, positions = (block_of(t, leading) for t in (op.operands[0].type, op.results[0].type, op.results[1].type))
    memrefs = [memref_text(t) for t in (operand, values, positions)]
    text = LoopText(symbol, list(zip(("in0", "out0", "out1"), memrefs)))
    key = SortKey(0, descending=ir.BoolAttr(op.attributes["largest"]).value, canonical=ir.BoolAttr(op.attributes["canonical"]).value)

    def write(at, rank: str, chosen: str) -> None:
        text.store(text.load("%in0", memrefs[0], at(chosen)), "%out0", memrefs[1], at(rank))
        position = text.value(f"arith.index_cast {chosen} : index to {element_text(positions)}")
        text.store(position, "%out1", memrefs[2], at(rank))

    k = ir.RankedTensorType(values).shape[-1]
    select(text, operand, "%in0", ir.RankedTensorType(operand).rank - 1, k, key, write, parallel_rows=parallel_rows)
    return text.text()


def top_k_library_text(symbol: str, largest: bool, canonical: bool) -> str:
    """The runtime library's TopK of f32 rows (`runtime_library.py`), shape-generic:
    (x, values, positions, rows, n, k) -> the k largest (or smallest) of each of `rows` rows
    of n and their i32 positions, k at most `MAX_SELECTED`; pointers to contiguous rows."""
    dynamic = {"x": "memref<?x?xf32>", "top_values": "memref<?x?xf32>", "top_positions": "memref<?x?xi32>"}
    text = LoopText(symbol, [("x_start", "memref<1xf32>"), ("top_values_start", "memref<1xf32>"), ("top_positions_start", "memref<1xi32>"),
                             ("rows", "index"), ("n", "index"), ("k", "index")])
    for name, width in (("x", "%n"), ("top_values", "%k"), ("top_positions", "%k")):
        start_type = "memref<1xi32>" if name == "top_positions" else "memref<1xf32>"
        text.line(f"%{name} = memref.reinterpret_cast %{name}_start to offset: [0], sizes: [%rows, {width}], "
                  f"strides: [{width}, 1] : {start_type} to {dynamic[name]}")

    def write(at, rank: str, chosen: str) -> None:
        text.store(text.load("%x", dynamic["x"], at(chosen)), "%top_values", dynamic["top_values"], at(rank))
        text.store(text.value(f"arith.index_cast {chosen} : index to i32"), "%top_positions", dynamic["top_positions"], at(rank))

    rows_of_f32 = ir.RankedTensorType.get([1, 1], ir.F32Type.get())  # the keys' rank and element: sizes are arguments
    select(text, rows_of_f32, "%x", 1, "%k", SortKey(0, descending=largest, canonical=canonical), write,
           extents=["%rows", "%n"], keys_memref_type=dynamic["x"])
    return text.text()


def block_of(tensor_type: ir.Type, leading: int | None) -> ir.Type:
    """`tensor_type` with `leading` rows in its leading dimension (None: as it is)."""
    if leading is None:
        return tensor_type
    tensor = ir.RankedTensorType(tensor_type)
    return ir.RankedTensorType.get([leading] + list(tensor.shape[1:]), tensor.element_type)


@dataclass(frozen=True)
class Selection:
    """The k-entry buffer a selection fills: room for `capacity` entries, `k` of them used (an
    index value: a constant, or the library function's argument), `last` the index k - 1."""

    capacity: int
    k: str
    last: str
    static: bool = True  # k is the capacity (else an argument, at most the capacity)

    @property
    def keys_type(self) -> str:
        return f"memref<{self.capacity}xi64>"

    @property
    def positions_type(self) -> str:
        return f"memref<{self.capacity}xindex>"


def select(text: LoopText, key_type: ir.Type, keys_memref: str, dimension: int, k: int | str, key: SortKey, write,
           extents: list[str] | None = None, keys_memref_type: str | None = None, parallel_rows: bool = False) -> None:
    """Per row of `keys_memref` along `dimension`, the first k positions of the stable order of
    `key` into a k-entry buffer, then `write(at, rank, chosen)` for each rank: `at(position)`
    the indices of a position of the row, `chosen` the position at `rank`. `key_type` gives
    the keys' element and rank; sizes are its shape's, or `extents` (index values) with k an
    index value at most `MAX_SELECTED` and `keys_memref_type` the keys' dynamic memref. With
    `parallel_rows` (a GPU's kernel: one thread a row) the rows are one `scf.parallel`, each
    iteration with a buffer of its own, and positions are scanned one by one (the vector
    chunks are the CPU's)."""
    shape = list(ir.RankedTensorType(key_type).shape)
    keys_memref_type = keys_memref_type or memref_text(key_type)
    static = extents is None
    if parallel_rows and static and shape[dimension] >= ROW_LANES * k:
        select_by_lanes(text, key_type, keys_memref, keys_memref_type, dimension, k, key, write)
        return
    extents = [text.constant(size) for size in shape] if static else extents
    selection = Selection(k, text.constant(k), text.constant(k - 1)) if static else \
        Selection(MAX_SELECTED, k, text.value(f"arith.subi {k}, {text.constant(1)} : index"), static=False)
    if parallel_rows:
        row = dict(zip([d for d in range(len(shape)) if d != dimension],
                       text.parallel([size for d, size in enumerate(shape) if d != dimension])))
    text.line(f"%keys = memref.alloca() : {selection.keys_type}")
    text.line(f"%positions = memref.alloca() : {selection.positions_type}")
    if not parallel_rows:
        row = {d: text.loop(extent, "r") for d, extent in enumerate(extents) if d != dimension}

    def at(position: str) -> list[str]:
        return [position if d == dimension else row[d] for d in range(len(shape))]

    def key_of(position: str) -> str:
        return sortable(text, text.load(keys_memref, keys_memref_type, at(position)), key_type, key.canonical, key.descending)

    first = text.loop(selection.k, "p")
    insert(text, selection, key_of(first), first, first)
    text.close()
    threshold = text.load("%keys", selection.keys_type, [selection.last])
    start = selection.k
    contiguous = not parallel_rows and dimension == len(shape) - 1 and CONTIGUOUS.match(keys_memref_type)
    lanes = chunk_lanes(element_text(key_type))
    if static and contiguous and (chunks := (shape[dimension] - k) // lanes):
        threshold = scan_chunks(text, keys_memref, keys_memref_type, key_type, at, key, selection, text.constant(chunks), threshold, key_of)
        start = text.constant(k + chunks * lanes)
    elif not static and contiguous:
        past_k = text.value(f"arith.subi {extents[dimension]}, {selection.k} : index")
        chunks = text.value(f"arith.divui {past_k}, {text.constant(lanes)} : index")
        threshold = scan_chunks(text, keys_memref, keys_memref_type, key_type, at, key, selection, chunks, threshold, key_of)
        start = text.value(f"arith.addi {selection.k}, {text.value(f'arith.muli {chunks}, {text.constant(lanes)} : index')} : index")
    if not static or start != extents[dimension]:
        scan(text, start, extents[dimension], threshold, selection, key_of)
    rank = text.loop(selection.k, "j")
    write(at, rank, text.load("%positions", selection.positions_type, [rank]))
    text.close()
    if parallel_rows:
        text.close_parallel()
        return
    for _ in row:
        text.close()


def select_by_lanes(text: LoopText, key_type: ir.Type, keys_memref: str, keys_memref_type: str, dimension: int, k: int,
                    key: SortKey, write) -> None:
    """`select` for a GPU over rows of at least ROW_LANES x k: ROW_LANES threads a row, each
    selecting the first k of its positions lane, lane + ROW_LANES, ... (the bounded
    insertion, scanned in order: equal keys keep their order), their positions into a
    scratch array; then a thread a row merges its lanes' k-entry lists, taking k times the
    first head by key and then position (the stable order). One thread a row read the row
    alone: 512 threads for the benchmark's 512 x 4096 top-k, its loads a row apart."""
    shape = list(ir.RankedTensorType(key_type).shape)
    length, rows = shape[dimension], [size for d, size in enumerate(shape) if d != dimension]
    candidates_type = f"memref<{'x'.join(map(str, rows + [ROW_LANES, k]))}xindex>"
    text.line(f"%candidates = memref.alloc() {{alignment = 64 : i64}} : {candidates_type}")

    def at_of(row: list[str]):
        return lambda position: row[:dimension] + [position] + row[dimension:]

    def key_at(at, position: str) -> str:
        return sortable(text, text.load(keys_memref, keys_memref_type, at(position)), key_type, key.canonical, key.descending)

    indices = text.parallel(rows + [ROW_LANES], "l")
    row, lane = indices[:-1], indices[-1]
    at = at_of(row)

    def strided(step: str) -> str:
        return text.value(f"arith.addi {lane}, {text.value(f'arith.muli {step}, {text.constant(ROW_LANES)} : index')} : index")

    selection = Selection(k, text.constant(k), text.constant(k - 1))
    text.line(f"%keys = memref.alloca() : {selection.keys_type}")
    text.line(f"%positions = memref.alloca() : {selection.positions_type}")
    first = text.loop(selection.k, "p")
    insert(text, selection, key_at(at, strided(first)), first, first)
    text.close()
    count = text.value(f"arith.divui {text.value(f'arith.subi {text.constant(length + ROW_LANES - 1)}, {lane} : index')}, "
                       f"{text.constant(ROW_LANES)} : index")
    scan(text, selection.k, count, text.load("%keys", selection.keys_type, [selection.last]), selection,
         lambda step: key_at(at, strided(step)))
    rank = text.loop(selection.k, "j")
    text.store(strided(text.load("%positions", selection.positions_type, [rank])), "%candidates", candidates_type, row + [lane, rank])
    text.close()
    text.close_parallel()

    row = text.parallel(rows, "m")
    at = at_of(row)
    heads_type = f"memref<{ROW_LANES}xindex>"
    text.line(f"%heads = memref.alloca() : {heads_type}")
    lane = text.loop(ROW_LANES, "h")
    text.store(text.constant(0), "%heads", heads_type, [lane])
    text.close()
    rank = text.loop(k, "j")
    lane, best = text.fresh("h"), text.fresh("b")
    chosen, chosen_key, chosen_position = text.fresh("b"), text.fresh("c"), text.fresh("q")
    text.open(f"{best}:3 = scf.for {lane} = {text.constant(0)} to {text.constant(ROW_LANES)} step {text.constant(1)} "
              f"iter_args({chosen} = {text.constant(0)}, {chosen_key} = {text.constant(2 ** 63 - 1, 'i64')}, "
              f"{chosen_position} = {text.constant(length)}) -> (index, i64, index)")
    head = text.load("%heads", heads_type, [lane])
    left = text.value(f"arith.cmpi ult, {head}, {text.constant(k)} : index")
    clamped = text.value(f"arith.minui {head}, {text.constant(k - 1)} : index")
    position = text.load("%candidates", candidates_type, row + [lane, clamped])
    candidate = key_at(at, position)
    less = text.value(f"arith.cmpi slt, {candidate}, {chosen_key} : i64")
    tie = text.value(f"arith.andi {text.value(f'arith.cmpi eq, {candidate}, {chosen_key} : i64')}, "
                     f"{text.value(f'arith.cmpi ult, {position}, {chosen_position} : index')} : i1")
    takes = text.value(f"arith.andi {left}, {text.value(f'arith.ori {less}, {tie} : i1')} : i1")
    text.line(f"scf.yield {text.value(f'arith.select {takes}, {lane}, {chosen} : index')}, "
              f"{text.value(f'arith.select {takes}, {candidate}, {chosen_key} : i64')}, "
              f"{text.value(f'arith.select {takes}, {position}, {chosen_position} : index')} : index, i64, index")
    text.close()
    advanced = text.value(f"arith.addi {text.load('%heads', heads_type, [f'{best}#0'])}, {text.constant(1)} : index")
    text.store(advanced, "%heads", heads_type, [f"{best}#0"])
    write(at, rank, f"{best}#2")
    text.close()
    text.close_parallel()
    text.line(f"memref.dealloc %candidates : {candidates_type}")


def scan(text: LoopText, lower: str, upper: str, threshold: str, selection: Selection, key_of) -> str:
    """Positions [lower, upper) one by one: an element whose key is before the buffer's last
    (the loop-carried `threshold`) is inserted; the threshold after the last."""
    position, carried, result = text.fresh("p"), text.fresh("t"), text.fresh("t")
    text.open(f"{result} = scf.for {position} = {lower} to {upper} step {text.constant(1)} iter_args({carried} = {threshold}) -> (i64)")
    candidate = key_of(position)
    enters = text.value(f"arith.cmpi slt, {candidate}, {carried} : i64")
    updated = text.fresh("t")
    text.open(f"{updated} = scf.if {enters} -> (i64)")
    insert(text, selection, candidate, position, selection.last)
    text.line(f"scf.yield {text.load('%keys', selection.keys_type, [selection.last])} : i64")
    text.close("} else {")
    text.line(f"scf.yield {carried} : i64")
    text.close()
    text.line(f"scf.yield {updated} : i64")
    text.close()
    return result


def chunk_lanes(element: str) -> int:
    """Keys a chunk of `scan_chunks` compares at once: FLOAT_CHUNK_BYTES of f32 or f64 keys,
    which are compared as floats; LANES of the others, whose keys are widened to i64."""
    return FLOAT_CHUNK_BYTES * 8 // FLOAT_BITS[element] if element in FLOAT_FILTERED else LANES


def scan_chunks(text: LoopText, keys_memref: str, keys_memref_type: str, key_type: ir.Type, at, key: SortKey,
                selection: Selection, chunks: str, threshold: str, key_of) -> str:
    """Positions k .. k + chunks * lanes of a contiguous row, `chunk_lanes` at a time: their
    keys as one vector compared with the threshold, and only the lanes of a chunk that may
    hold a key before it looked at one by one (`scan_lanes`). Past the first few hundred
    positions of a row almost no element enters, so the row streams at vector speed.

    f32 and f64 keys are compared as the floats they are (`float_filter`): a compare per
    vector, where the integer key costs five operations a lane and a widening to i64 (a
    512x4096 f32 TopK's library function ran at 8 GB/s, bound by that arithmetic), and
    against the tighter of the threshold and the row's `segment_bound`."""
    element = element_text(key_type)
    lanes = chunk_lanes(element)
    if element in FLOAT_FILTERED:
        bound = segment_bound(text, keys_memref, keys_memref_type, at, selection, chunks, lanes, element, key.descending)
    chunk, carried, result = text.fresh("c"), text.fresh("t"), text.fresh("t")
    text.open(f"{result} = scf.for {chunk} = {text.constant(0)} to {chunks} step {text.constant(1)} "
              f"iter_args({carried} = {threshold}) -> (i64)")
    offset = text.value(f"arith.muli {chunk}, {text.constant(lanes)} : index")
    base = text.value(f"arith.addi {offset}, {selection.k} : index")
    values = text.value(f"vector.load {keys_memref}[{', '.join(at(base))}] : {keys_memref_type}, vector<{lanes}x{element}>")
    if element in FLOAT_FILTERED:
        before = float_filter(text, values, tighter(text, bound, unsortable(text, carried, element, key.descending), element, key.descending),
                              element, lanes, key.descending)
    else:
        keys = sortable(text, values, key_type, key.canonical, key.descending, lanes=lanes)
        bound = text.value(f"vector.broadcast {carried} : i64 to vector<{lanes}xi64>")
        before = text.value(f"arith.cmpi slt, {keys}, {bound} : vector<{lanes}xi64>")
    any_before = text.value(f"vector.reduction <or>, {before} : vector<{lanes}xi1> into i1")
    updated = text.fresh("t")
    text.open(f"{updated} = scf.if {any_before} -> (i64)")
    text.line(f"scf.yield {scan_lanes(text, before, lanes, base, carried, selection, key_of)} : i64")
    text.close("} else {")
    text.line(f"scf.yield {carried} : i64")
    text.close()
    text.line(f"scf.yield {updated} : i64")
    text.close()
    return result


def scan_lanes(text: LoopText, before: str, lanes: int, base: str, threshold: str, selection: Selection, key_of) -> str:
    """The positions base + lane of the lanes set in `before` (a vector<lanes x i1>), lowest
    first, each inserted when its key is before the threshold (carried, as in `scan`); the
    threshold after the last. A chunk the filter lets through has one or two such lanes, where
    scanning all of its positions one by one made the scan of a random row's hits cost three
    times its vector compares."""
    packed = text.value(f"vector.bitcast {before} : vector<{lanes}xi1> to vector<1xi{lanes}>")
    mask = text.value(f"vector.extract {packed}[0] : i{lanes} from vector<1xi{lanes}>")
    if lanes < 64:
        mask = text.value(f"arith.extui {mask} : i{lanes} to i64")
    remaining, carried, result = text.fresh("m"), text.fresh("t"), text.fresh("r")
    text.open(f"{result}:2 = scf.while ({remaining} = {mask}, {carried} = {threshold}) : (i64, i64) -> (i64, i64)")
    more = text.value(f"arith.cmpi ne, {remaining}, {text.constant(0, 'i64')} : i64")
    text.line(f"scf.condition({more}) {remaining}, {carried} : i64, i64")
    text.depth -= 1
    left, bound = text.fresh("m"), text.fresh("t")
    text.line(f"}} do {{\n{'  ' * text.depth}^bb0({left}: i64, {bound}: i64):")
    text.depth += 1
    lane = text.value(f"math.cttz {left} : i64")
    position = text.value(f"arith.addi {base}, {text.value(f'arith.index_cast {lane} : i64 to index')} : index")
    candidate = key_of(position)
    enters = text.value(f"arith.cmpi slt, {candidate}, {bound} : i64")
    updated = text.fresh("t")
    text.open(f"{updated} = scf.if {enters} -> (i64)")
    threshold_after = next_threshold(text, selection, candidate)
    insert_last(text, selection, candidate, position)
    text.line(f"scf.yield {threshold_after} : i64")
    text.close("} else {")
    text.line(f"scf.yield {bound} : i64")
    text.close()
    one = text.constant(1, "i64")
    lowest_cleared = text.value(f"arith.andi {left}, {text.value(f'arith.subi {left}, {one} : i64')} : i64")
    text.line(f"scf.yield {lowest_cleared}, {updated} : i64, i64")
    text.close()
    return f"{result}#1"


def segment_bound(text: LoopText, keys_memref: str, keys_memref_type: str, at, selection: Selection, chunks: str,
                  lanes: int, element: str, descending: bool) -> str | None:
    """A float no key of the top k is strictly after, from a pass over the chunks' keys: of
    the SEGMENTS classes of positions (position mod SEGMENTS), each class's greatest float
    (least, ascending), and of those the least (greatest): every class holds a key at least
    that great, so SEGMENTS >= k keys are, and a key below it is out. NaNs are left out of
    the extremes (a class of NaNs alone keeps the identity, which lets every key through),
    and they pass the filter anyway (unordered). Where k may exceed SEGMENTS (a library call's
    argument), the identity; None where k always does. The pass costs a vector compare and
    select per SEGMENTS keys while the row comes from memory; with it a random 4096-key row
    checks about 50 keys one by one and inserts about 35, against about 90 inserted with the
    threshold alone (a 512x4096 f32 TopK, k = 16, one thread: 0.70 -> 0.49 ms)."""
    if selection.static and selection.capacity > SEGMENTS:
        return None
    identity = text.constant((NEGATIVE_INFINITY if descending else POSITIVE_INFINITY)[element], element)
    if selection.static:
        return extremes_bound(text, keys_memref, keys_memref_type, at, selection, chunks, lanes, element, identity, descending)
    bound = text.fresh("b")
    covered = text.value(f"arith.cmpi ule, {selection.k}, {text.constant(SEGMENTS)} : index")
    text.open(f"{bound} = scf.if {covered} -> ({element})")
    text.line(f"scf.yield {extremes_bound(text, keys_memref, keys_memref_type, at, selection, chunks, lanes, element, identity, descending)} : {element}")
    text.close("} else {")
    text.line(f"scf.yield {identity} : {element}")
    text.close()
    return bound


def extremes_bound(text: LoopText, keys_memref: str, keys_memref_type: str, at, selection: Selection, chunks: str,
                   lanes: int, element: str, identity: str, descending: bool) -> str:
    """`segment_bound`'s pass: the classes' extremes, and their least (greatest)."""
    vector = f"vector<{SEGMENTS}x{element}>"
    beyond = "ogt" if descending else "olt"
    chunk, carried, extremes = text.fresh("c"), text.fresh("e"), text.fresh("e")
    start = text.value(f"vector.broadcast {identity} : {element} to {vector}")
    text.open(f"{extremes} = scf.for {chunk} = {text.constant(0)} to {chunks} step {text.constant(1)} "
              f"iter_args({carried} = {start}) -> ({vector})")
    base = text.value(f"arith.addi {text.value(f'arith.muli {chunk}, {text.constant(lanes)} : index')}, {selection.k} : index")
    running = carried
    for part in range(lanes // SEGMENTS):
        position = text.value(f"arith.addi {base}, {text.constant(part * SEGMENTS)} : index")
        values = text.value(f"vector.load {keys_memref}[{', '.join(at(position))}] : {keys_memref_type}, {vector}")
        further = text.value(f"arith.cmpf {beyond}, {values}, {running} : {vector}")
        running = text.value(f"arith.select {further}, {values}, {running} : vector<{SEGMENTS}xi1>, {vector}")
    text.line(f"scf.yield {running} : {vector}")
    text.close()
    return text.value(f"vector.reduction <{'minnumf' if descending else 'maxnumf'}>, {extremes} : {vector} into {element}")


def tighter(text: LoopText, bound: str | None, threshold: str, element: str, descending: bool) -> str:
    """The tighter of `segment_bound`'s float (None: no bound) and the threshold's; the
    threshold where it is NaN (every key then passes, as before)."""
    if bound is None:
        return threshold
    beyond = text.value(f"arith.cmpf {'ogt' if descending else 'olt'}, {bound}, {threshold} : {element}")
    return text.value(f"arith.select {beyond}, {bound}, {threshold} : {element}")


def float_filter(text: LoopText, values: str, bound: str, element: str, lanes: int, descending: bool) -> str:
    """Lanes of `values` that may come before the float `bound` (the threshold key's float,
    `unsortable`, or tighter): x >= it (descending) or x <= it, or unordered. Every key
    strictly before the threshold passes: NaN on either side is unordered, and of two non-NaN
    floats the total order and IEEE's differ only on -0 and +0, which compare equal. Ties and
    NaNs pass too; `scan_lanes` decides with the exact key."""
    bound = text.value(f"vector.broadcast {bound} : {element} to vector<{lanes}x{element}>")
    predicate = "uge" if descending else "ule"
    return text.value(f"arith.cmpf {predicate}, {values}, {bound} : vector<{lanes}x{element}>")


def unsortable(text: LoopText, key: str, element: str, descending: bool) -> str:
    """The float whose key (`sortable`, not canonicalized) is the i64 `key`."""
    bits = FLOAT_BITS[element]
    integer = f"i{bits}"
    ordered = text.value(f"arith.xori {key}, {text.constant(-1, 'i64')} : i64") if descending else key
    if bits != 64:
        ordered = text.value(f"arith.trunci {ordered} : i64 to {integer}")
    sign = text.value(f"arith.shrsi {ordered}, {text.constant(bits - 1, integer)} : {integer}")
    magnitude = text.value(f"arith.andi {sign}, {text.constant((1 << (bits - 1)) - 1, integer)} : {integer}")
    raw = text.value(f"arith.xori {ordered}, {magnitude} : {integer}")
    return text.value(f"arith.bitcast {raw} : {integer} to {element}")


def next_threshold(text: LoopText, selection: Selection, key: str) -> str:
    """The buffer's last key once `key`, which is before it, is inserted: the greater of `key`
    and the key before the last (`key` alone when k is 1). Read before the insertion: reading
    the last key back from `shift_in`'s vector store waits for the store (a load from inside
    a wider store is not forwarded), and the next chunk's compare waits on that (a random
    512x4096 TopK, k = 16: 1.2 -> 0.8 ms on one thread with the two together)."""
    if selection.capacity == 1:
        return key
    zero = text.constant(0)
    slot = text.value(f"arith.maxsi {text.value(f'arith.subi {selection.last}, {text.constant(1)} : index')}, {zero} : index")
    greater = text.value(f"arith.maxsi {text.load('%keys', selection.keys_type, [slot])}, {key} : i64")
    first = text.value(f"arith.cmpi eq, {selection.last}, {zero} : index")
    return text.value(f"arith.select {first}, {key}, {greater} : i64")


def insert_last(text: LoopText, selection: Selection, key: str, position: str) -> None:
    """`insert` at the last slot, as vector selects over the whole buffer, without branches: a
    candidate that enters lands at a random rank, where the shifting loop's exit mispredicts
    (with `next_threshold`, a random 512x4096 TopK, k = 16, on one thread: 1.1-1.2 ms with
    the loop, 0.8 with the selects). A buffer of up to `SHORT_BUFFER` entries in use shifts
    that many."""
    if selection.static or selection.capacity <= SHORT_BUFFER:
        shift_in(text, selection, key, position, selection.capacity)
        return
    short = text.value(f"arith.cmpi ule, {selection.k}, {text.constant(SHORT_BUFFER)} : index")
    text.open(f"scf.if {short}")
    shift_in(text, selection, key, position, SHORT_BUFFER)
    text.close("} else {")
    shift_in(text, selection, key, position, selection.capacity)
    text.close()


def shift_in(text: LoopText, selection: Selection, key: str, position: str, width: int) -> None:
    """The first `width` entries of the buffer with (key, position) put before the entries
    whose keys are greater (they move down one lane, the last lane's dropped): lane j takes
    entry j, or entry j - 1 when that one moves too, or the new entry."""
    zero = text.constant(0)
    keys_type, positions_type = f"vector<{width}xi64>", f"vector<{width}xindex>"
    keys = text.value(f"vector.load %keys[{zero}] : {selection.keys_type}, {keys_type}")
    positions = text.value(f"vector.load %positions[{zero}] : {selection.positions_type}, {positions_type}")
    new_key = text.value(f"vector.broadcast {key} : i64 to {keys_type}")
    new_position = text.value(f"vector.broadcast {position} : index to {positions_type}")
    moves = text.value(f"arith.cmpi sgt, {keys}, {new_key} : {keys_type}")
    lanes = ", ".join(str(lane) for lane in [width] + list(range(width - 1)))  # lane 0 takes the second vector's first
    stay = text.constant("dense<false>", f"vector<{width}xi1>")
    previous_moves = text.value(f"vector.shuffle {moves}, {stay} [{lanes}] : vector<{width}xi1>, vector<{width}xi1>")
    for memref, memref_type, vector_type, current, new in (("%keys", selection.keys_type, keys_type, keys, new_key),
                                                           ("%positions", selection.positions_type, positions_type, positions, new_position)):
        previous = text.value(f"vector.shuffle {current}, {new} [{lanes}] : {vector_type}, {vector_type}")
        entering = text.value(f"arith.select {previous_moves}, {previous}, {new} : vector<{width}xi1>, {vector_type}")
        updated = text.value(f"arith.select {moves}, {entering}, {current} : vector<{width}xi1>, {vector_type}")
        text.line(f"vector.store {updated}, {memref}[{zero}] : {memref_type}, {vector_type}")


def insert(text: LoopText, selection: Selection, key: str, position: str, slot: str) -> None:
    """Put (key, position) into the k-entry buffer at `slot` or before it: entries from
    `slot` back whose keys are greater move down one (the one at `slot` is overwritten)."""
    keys, positions = selection.keys_type, selection.positions_type
    moving, final = text.fresh("j"), text.fresh("j")
    text.open(f"{final} = scf.while ({moving} = {slot}) : (index) -> index")
    nonzero = text.value(f"arith.cmpi sgt, {moving}, {text.constant(0)} : index")
    before = text.fresh("b")
    text.open(f"{before} = scf.if {nonzero} -> (i1)")
    previous = text.value(f"arith.subi {moving}, {text.constant(1)} : index")
    later = text.value(f"arith.cmpi slt, {key}, {text.load('%keys', keys, [previous])} : i64")
    text.line(f"scf.yield {later} : i1")
    text.close("} else {")
    text.line(f"scf.yield {text.constant(0, 'i1')} : i1")
    text.close()
    text.line(f"scf.condition({before}) {moving} : index")
    text.depth -= 1
    shifting = text.fresh("j")
    text.line(f"}} do {{\n{'  ' * text.depth}^bb0({shifting}: index):")
    text.depth += 1
    previous = text.value(f"arith.subi {shifting}, {text.constant(1)} : index")
    text.store(text.load("%keys", keys, [previous]), "%keys", keys, [shifting])
    text.store(text.load("%positions", positions, [previous]), "%positions", positions, [shifting])
    text.line(f"scf.yield {previous} : index")
    text.close()
    text.store(key, "%keys", keys, [final])
    text.store(position, "%positions", positions, [final])

