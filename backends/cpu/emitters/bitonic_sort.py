"""A whole sort as a kernel of its own, for targets that run no host calls (the cuda backend;
on the CPU it is a host call of numpy's sort): a bitonic sorting network over every row.

Each row (a position of the dimensions other than the sort's) is sorted in place in the
results, each element's original position carried beside it in a scratch array. The network
is the "flip" form: for each block size k = 2, 4, ..., up to the row's length rounded up to a
power of two, a step pairing each element of a block with its mirror image in the block,
then steps pairing elements k/4, k/8, ..., 1 apart. Every comparison leaves the element that
goes first at the lower position, so the positions past the row's end (the padding to a
power of two) hold virtual elements that go last: a pair reaching one is skipped.
log2(N) (log2(N) + 1) / 2 steps: 78 for rows of 4096.

Steps run as XLA:GPU runs them: consecutive steps whose pairs stay inside aligned tiles of
`tile_size` positions (up to 2048, as many as the tile's elements of every operand and their
positions fit in 48 KiB of shared memory) are one launch of a block per tile, written as a
block program (`backends/cuda/block_programs.py`): its threads load the tile into
workgroup memory (the first launch from the operands, the positions counted), each step a
phase in which every thread compares and exchanges one pair, a barrier between phases, then
they store it back. Every other step is a launch of its own over (rows, pairs) in global
memory. Rows of 4096: 78 steps in 3 launches (66 in tiles of 2048, the flip of 4096, 11 in
tiles); rows of up to 2048: one.

The order is the comparator's keys (`sort_comparator.comparator_keys`: a lexicographic chain
of operands, ascending or descending, NaN and -0 canonical or in IEEE total order) encoded as
the host sort and the top-k kernel encode them (`top_k_kernel.sortable`), ties broken by the
original position: that is a stable sort's order, and one valid order of an unstable sort.
A comparator that is no such chain, or keys on complex parts, keep the host call (which the
cuda backend refuses). O(n log^2 n) compares a row.
"""

from dataclasses import dataclass

from mlirxla.dialects.xhlo.types import bit_width
from mlirxla.mlir import ir
from mlirxla.transforms.sort_comparator import comparator_keys

from ..loop_text import LoopText, element_text, is_float, memref_text
from ..top_k_kernel import FLOAT_BITS, selected_count, sortable
from . import loop_kernels

MAX_TILE = 2048  # positions: a thread a pair, 1024 threads, a block's most
# canonicalization folds a loop of one iteration into its body, and a block program's loops
# must stay loops: at least two threads (a tile of 4 positions) and two blocks
MIN_TILE = 4
MIN_BLOCKS = 2
SHARED_BYTES = 48 * 1024  # the workgroup memory a block has without opting in to more
POSITION = "i64"  # an element's original position, the tie-break
THREAD_X = "[#gpu.loop_dim_map<processor = thread_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]"
BLOCK_X = "[#gpu.loop_dim_map<processor = block_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]"


def emit_sort(emitter, op: ir.Operation) -> list:
    """A sort read only in its first k positions is the top-k selection kernel; a whole sort,
    where the emitter makes kernels for a GPU, the bitonic network; else a host call."""
    if not emitter.gpu_kernels or selected_count(op) is not None or network_reason(op) is not None:
        return loop_kernels.emit_sort(emitter, op)
    network = Network.of(op)
    return loop_kernels.gpu_kernel_or_host_call(emitter, op, network.describe(), lambda symbol: network_text(symbol, op))


def network_reason(op: ir.Operation) -> str | None:
    """Why the network cannot sort `op`, or None."""
    keys = comparator_keys(op)
    if keys is None:
        return "its comparator is not a lexicographic chain of keys"
    for key in keys:
        element = element_text(op.operands[key.operand].type)
        if key.part != "value" or element.startswith("complex") or (is_float(element) and element not in FLOAT_BITS):
            return f"a key of {element} has no integer encoding here"
    if not Network.of(op).tile:
        return f"{len(op.operands)} operands leave no room for a tile of {MIN_TILE} positions in {SHARED_BYTES} bytes of shared memory"
    return None


def dimension_of(op: ir.Operation) -> int:
    rank = ir.RankedTensorType(op.operands[0].type).rank
    return ir.IntegerAttr(op.attributes["dimension"]).value % rank if "dimension" in op.attributes else rank - 1


def padded_length(length: int) -> int:
    return 1 << max(0, (length - 1).bit_length())


def tile_size(padded: int, bytes_per_position: int) -> int:
    """Positions a block sorts in workgroup memory: a power of two, the padded row's length
    or less (`MIN_TILE` at least, the positions past the row virtual); 0 when even that does
    not fit."""
    tile = min(max(padded, MIN_TILE), MAX_TILE)
    while tile > MIN_TILE and tile * bytes_per_position > SHARED_BYTES:
        tile //= 2
    return tile if tile * bytes_per_position <= SHARED_BYTES else 0


@dataclass(frozen=True)
class Network:
    """A sort's network: its rows' length, padded to a power of two, and its tiles' size."""

    length: int
    padded: int
    tile: int

    @staticmethod
    def of(op: ir.Operation) -> "Network":
        length = ir.RankedTensorType(op.operands[0].type).shape[dimension_of(op)]
        element_bytes = sum(-(-bit_width(ir.RankedTensorType(v.type).element_type) // 8) for v in op.operands)
        padded = padded_length(length)
        return Network(length, padded, tile_size(padded, element_bytes + 8))

    def describe(self) -> str:
        launches = network_launches(self.padded, self.tile)
        tiled = sum(1 for steps in launches if tiled_steps(steps, self.tile))
        return (f"sort as a bitonic network over rows of {self.length}, {len(network_steps(self.padded))} compare-exchange steps "
                f"in {max(1, len(launches))} launch(es), {tiled} of them in shared-memory tiles of {self.tile} positions")


def network_steps(padded: int) -> list[tuple[str, int]]:
    """The network's steps in order: ("flip", block size) or ("half", distance)."""
    steps, block = [], 2
    while block <= padded:
        steps.append(("flip", block))
        distance = block // 4
        while distance >= 1:
            steps.append(("half", distance))
            distance //= 2
        block *= 2
    return steps


def within(step: tuple[str, int], tile: int) -> bool:
    """Whether every pair of the step lies inside one aligned tile of `tile` positions."""
    kind, span = step
    return span <= tile if kind == "flip" else 2 * span <= tile


def tiled_steps(steps: list[tuple[str, int]], tile: int) -> bool:
    return within(steps[0], tile)


def network_launches(padded: int, tile: int) -> list[list[tuple[str, int]]]:
    """The steps as launches: each run of consecutive steps within tiles one launch, every
    other step a launch of its own."""
    launches: list[list[tuple[str, int]]] = []
    for step in network_steps(padded):
        if within(step, tile) and launches and within(launches[-1][-1], tile):
            launches[-1].append(step)
        else:
            launches.append([step])
    return launches


def network_text(symbol: str, op: ir.Operation) -> str:
    """The kernel: (operands...) -> (sorted results...), positions in scratch."""
    dimension = dimension_of(op)
    shape = list(ir.RankedTensorType(op.operands[0].type).shape)
    network = Network.of(op)
    inputs = [(f"in{i}", memref_text(v.type)) for i, v in enumerate(op.operands)]
    outputs = [(f"out{i}", memref_text(v.type)) for i, v in enumerate(op.results)]
    text = LoopText(symbol, inputs + outputs)
    launches = network_launches(network.padded, network.tile)
    if not launches:  # rows of one element
        indices = text.parallel(shape, "c")
        for (source, source_type), (target, _) in zip(inputs, outputs):
            text.store(text.load(f"%{source}", source_type, indices), f"%{target}", source_type, indices)
        text.close_parallel()
        return text.text()
    positions = ("%positions", f"memref<{'x'.join(map(str, shape))}x{POSITION}>")
    text.line(f"%positions = memref.alloc() {{alignment = 64 : i64}} : {positions[1]}")
    tiles = Tiles([(f"%tile{i}", f"memref<{network.tile}x{element_text(v.type)}>") for i, v in enumerate(op.results)],
                  ("%tile_positions", f"memref<{network.tile}x{POSITION}>"))
    for name, memref_type in tiles.operands + [tiles.positions]:
        text.line(f"{name} = memref.alloca() : {memref_type}")
    sort = SortText(text, op, dimension, shape, network, inputs, outputs, positions, tiles)
    for number, steps in enumerate(launches):
        if tiled_steps(steps, network.tile):
            sort.tiled_launch(steps, first=number == 0, last=number == len(launches) - 1)
        else:
            sort.global_step(*steps[0])
    text.line(f"memref.dealloc %positions : {positions[1]}")
    return text.text()


@dataclass(frozen=True)
class Tiles:
    """The workgroup memory of a tiled launch: (name, memref type) of each result's tile and
    of the positions'."""

    operands: list[tuple[str, str]]
    positions: tuple[str, str]


@dataclass
class SortText:
    """The network's launches as loop nests of `text`."""

    text: LoopText
    op: ir.Operation
    dimension: int
    shape: list[int]
    network: Network
    inputs: list[tuple[str, str]]
    outputs: list[tuple[str, str]]
    positions: tuple[str, str]
    tiles: Tiles

    @property
    def rows(self) -> list[int]:
        return self.shape[:self.dimension] + self.shape[self.dimension + 1:]

    def at(self, row: list[str], position: str) -> list[str]:
        return row[:self.dimension] + [position] + row[self.dimension:]

    def global_step(self, kind: str, span: int) -> None:
        """One step over (rows, pairs), in the results and positions in global memory."""
        text = self.text
        indices = text.parallel(self.rows + [self.network.padded // 2], "s")
        low, high = pair_positions(text, kind, span, indices[-1])
        row = indices[:-1]
        buffers = [(f"%{name}", memref_type) for name, memref_type in self.outputs] + [self.positions]
        self.compare_exchange(buffers, self.at(row, low), self.at(row, high), high)
        text.close_parallel()

    def compare_exchange(self, buffers: list[tuple[str, str]], low: list[str], high: list[str], row_position: str) -> None:
        """Exchange the elements at `low` and `high` of `buffers` (the operands', then the
        positions) when the one at `high` goes first; skipped when `row_position`, the
        higher one's position in its row, is past the row's end."""
        text = self.text
        text.open(f"scf.if {text.value(f'arith.cmpi ult, {row_position}, {text.constant(self.network.length)} : index')}")
        text.open(f"scf.if {goes_first(text, self.op, buffers, high, low)}")
        for name, memref_type in buffers:
            early, late = text.load(name, memref_type, low), text.load(name, memref_type, high)
            text.store(late, name, memref_type, low)
            text.store(early, name, memref_type, high)
        text.close()
        text.close()

    @property
    def per_row(self) -> int:
        return max(1, self.network.padded // self.network.tile)

    @property
    def blocks(self) -> int:
        """A block per tile of every row."""
        count = self.per_row
        for size in self.rows:
            count *= size
        return count

    def tiled_launch(self, steps: list[tuple[str, int]], first: bool, last: bool) -> None:
        """A block per tile of every row (`MIN_BLOCKS` at least, the others idle): load the
        tile into workgroup memory (`first`: from the operands, positions counted), the
        steps a phase each, store it back (`last`: the positions no later launch reads are
        not stored)."""
        text = self.text
        block = text.fresh("b")
        grid = max(MIN_BLOCKS, self.blocks)
        text.open(f"scf.parallel ({block}) = ({text.constant(0)}) to ({text.constant(grid)}) step ({text.constant(1)})")
        tile_buffers = self.tiles.operands + [self.tiles.positions]
        global_buffers = [(f"%{name}", memref_type) for name, memref_type in self.outputs] + [self.positions]
        sources = [(f"%{name}", memref_type) for name, memref_type in self.inputs] if first else global_buffers[:-1]

        def load(row, slot, position):
            for (source, source_type), (name, tile_type) in zip(sources, tile_buffers):
                text.store(text.load(source, source_type, self.at(row, position)), name, tile_type, [slot])
            counted = text.value(f"arith.index_cast {position} : index to {POSITION}") if first else \
                text.load(*self.positions, self.at(row, position))
            text.store(counted, *self.tiles.positions, [slot])

        def store(row, slot, position):
            for (name, tile_type), (target, target_type) in zip(tile_buffers, global_buffers[:-1 if last else None]):
                text.store(text.load(name, tile_type, [slot]), target, target_type, self.at(row, position))

        self.tile_phase(block, load)
        for kind, span in steps:
            self.step_phase(block, kind, span)
        self.tile_phase(block, store)
        text.line("scf.reduce")
        text.close(f"}} {{mapping = {BLOCK_X}}}")

    def thread_phase(self, block: str, body) -> None:
        """A loop over the block's threads (one per pair of the tile): `body(thread, row, start)`
        with the tile's row and its first position in the row, recomputed from `block`."""
        text = self.text
        thread = text.fresh("t")
        text.open(f"scf.parallel ({thread}) = ({text.constant(0)}) to ({text.constant(self.network.tile // 2)}) step ({text.constant(1)})")
        idle = self.blocks < MIN_BLOCKS
        if idle:
            text.open(f"scf.if {text.value(f'arith.cmpi ult, {block}, {text.constant(self.blocks)} : index')}")
        row_number = text.value(f"arith.divui {block}, {text.constant(self.per_row)} : index")
        tile_number = text.value(f"arith.remui {block}, {text.constant(self.per_row)} : index")
        start = text.value(f"arith.muli {tile_number}, {text.constant(self.network.tile)} : index")
        body(thread, delinearized(text, row_number, self.rows), start)
        if idle:
            text.close()
        text.line("scf.reduce")
        text.close(f"}} {{mapping = {THREAD_X}}}")

    def tile_phase(self, block: str, move) -> None:
        """Each thread moves two elements between the tile and the row: `move(row, slot,
        position)` for slots t and t + tile / 2 inside the row."""
        half = self.network.tile // 2

        def body(thread, row, start):
            text = self.text
            for slot in (thread, text.value(f"arith.addi {thread}, {text.constant(half)} : index")):
                position = text.value(f"arith.addi {start}, {slot} : index")
                text.open(f"scf.if {text.value(f'arith.cmpi ult, {position}, {text.constant(self.network.length)} : index')}")
                move(row, slot, position)
                text.close()

        self.thread_phase(block, body)

    def step_phase(self, block: str, kind: str, span: int) -> None:
        def body(thread, row, start):
            low, high = pair_positions(self.text, kind, span, thread)
            row_position = self.text.value(f"arith.addi {start}, {high} : index")
            self.compare_exchange(self.tiles.operands + [self.tiles.positions], [low], [high], row_position)

        self.thread_phase(block, body)


def delinearized(text: LoopText, linear: str, sizes: list[int]) -> list[str]:
    """The row-major indices over `sizes` of `linear`."""
    indices = []
    for size in reversed(sizes):
        indices.insert(0, text.value(f"arith.remui {linear}, {text.constant(size)} : index"))
        linear = text.value(f"arith.divui {linear}, {text.constant(size)} : index")
    return indices


def pair_positions(text: LoopText, kind: str, span: int, pair: str) -> tuple[str, str]:
    """The lower and higher positions the step compares for pair number `pair`."""
    if kind == "flip":
        half = text.constant(span // 2)
        block = text.value(f"arith.divui {pair}, {half} : index")
        offset = text.value(f"arith.remui {pair}, {half} : index")
        start = text.value(f"arith.muli {block}, {text.constant(span)} : index")
        low = text.value(f"arith.addi {start}, {offset} : index")
        end = text.value(f"arith.addi {start}, {text.constant(span - 1)} : index")
        return low, text.value(f"arith.subi {end}, {offset} : index")
    distance = text.constant(span)
    group = text.value(f"arith.divui {pair}, {distance} : index")
    offset = text.value(f"arith.remui {pair}, {distance} : index")
    low = text.value(f"arith.addi {text.value(f'arith.muli {group}, {text.constant(2 * span)} : index')}, {offset} : index")
    return low, text.value(f"arith.addi {low}, {distance} : index")


def goes_first(text: LoopText, op: ir.Operation, buffers: list[tuple[str, str]], late: list[str], early: list[str]) -> str:
    """An i1: the element at `late` goes before the one at `early` in `buffers` (the
    operands', then the positions): the keys in order, then the original positions."""
    positions, positions_type = buffers[-1]
    before = text.value(f"arith.cmpi slt, {text.load(positions, positions_type, late)}, "
                        f"{text.load(positions, positions_type, early)} : {POSITION}")
    for key in reversed(comparator_keys(op)):
        name, memref_type = buffers[key.operand]
        tensor_type = op.operands[key.operand].type
        a = sortable(text, text.load(name, memref_type, late), tensor_type, key.canonical, key.descending)
        b = sortable(text, text.load(name, memref_type, early), tensor_type, key.canonical, key.descending)
        less = text.value(f"arith.cmpi slt, {a}, {b} : i64")
        equal = text.value(f"arith.cmpi eq, {a}, {b} : i64")
        before = text.value(f"arith.ori {less}, {text.value(f'arith.andi {equal}, {before} : i1')} : i1")
    return before
