"""Independent launches of one kernel become one launch: the kernel side of XLA:GPU's
horizontal loop fusion (`transforms/horizontal_loop_fusion.py` makes such kernels).

The loop emitter makes every loop nest of a kernel function a launch of its own
(`loop_mapping.launch_skeleton`: a block loop over its grid holding a thread loop over its
block), run one after the other. A launch of a few blocks leaves most of the GPU idle (an
Adam update of a 512-element bias is one block on a GPU with 132 multiprocessors) and every
launch costs its overhead; nests over the same iteration space were fused already
(`loop_nest_fusion.py`), nests over different ones were not. Consecutive loop-emitter
launches none of which writes a buffer another one reads or writes run as one launch over
the sum of their grids: block `b` runs the member whose range of blocks holds it, as block
`b - first` of that member (a binary tree of comparisons on the block index, as deep as the
log of the member count); threads past a member's own block size do nothing. Such launches
may run in any order or at once, so the merged one computes what they computed.

Buffers are told apart by the function argument (or allocation) each access views; an op
that takes a buffer and is neither a load nor a view counts as writing it. Buffer
assignment's sharing shows here as well: a result written over an operand is read through
the result's argument (`kernel_source.kernel_function`). Emitter launches (rows, columns,
transposes) are not merged: their shared memory and barriers are sized for their own block.
"""

from dataclasses import dataclass

from mlirxla.mlir import arith, ir, scf

from .loop_mapping import MappedLoopNest, block_and_thread_loops
from .row_emitter import root
from .thread_program import index_constant

READS = {"memref.load", "vector.load"}  # ops reading the buffer of their first operand
VIEWS = {"memref.subview", "memref.expand_shape", "memref.collapse_shape", "memref.reinterpret_cast", "memref.cast",
         "memref.dim", "memref.extract_strided_metadata"}


@dataclass
class Footprint:
    """The buffers a launch reads and writes (function arguments or allocations)."""

    reads: set
    writes: set

    def independent_of(self, other: "Footprint") -> bool:
        return not (self.writes & (other.reads | other.writes)) and not (self.reads & other.writes)


def footprint(loop: ir.Operation) -> Footprint:
    found = Footprint(set(), set())

    def visit(op):
        op = op.operation
        buffers = [root(v) for v in op.operands if isinstance(v.type, ir.MemRefType)]
        if op.name in READS:
            found.reads.add(buffers[0])
        elif op.name not in VIEWS:
            found.writes.update(buffers)
        return ir.WalkResult.ADVANCE

    loop.walk(visit)
    return found


def merge_independent(launches: list[tuple]) -> list[tuple]:
    """`launches` ((mapping, block loop, body block) in program order, as
    `loop_mapping.map_loop_nests` makes them) with the loop-emitter launches between two
    emitter launches merged by wavefront (`by_wavefront`)."""
    if len(launches) < 2:
        return launches
    hoist_constants(launches[0][1].block)
    result, segment = [], []
    for launch in launches:
        if launch[0].emitter.startswith("loop"):
            segment.append(launch)
            continue
        result += by_wavefront(segment)
        result.append(launch)
        segment = []
    return result + by_wavefront(segment)


def by_wavefront(segment: list[tuple]) -> list[tuple]:
    """Each launch of `segment` in the first wavefront after every earlier launch it
    conflicts with (one writes a buffer the other reads or writes), the launches of a
    wavefront merged into one, the wavefronts in order where the segment stood. Launches in
    conflict keep their order; the launches of one wavefront conflict with none of each
    other. (Taking runs of consecutive independent launches instead would keep the nests of
    two merged kernels, each a chain, in as many launches as they have nests.)"""
    if len(segment) < 2:
        return segment
    footprints = [footprint(loop) for _, loop, _ in segment]
    wavefront = []
    for index, own in enumerate(footprints):
        wavefront.append(1 + max((wavefront[earlier] for earlier in range(index)
                                  if not own.independent_of(footprints[earlier])), default=-1))
    ops = [op.operation for op in segment[-1][1].block.operations]
    end = ops[ops.index(segment[-1][1]) + 1]
    merged = []
    for level in range(max(wavefront) + 1):
        group = [launch for launch, at in zip(segment, wavefront) if at == level]
        launch = merge(group) if len(group) > 1 else group[0]
        launch[1].move_before(end)
        merged.append(launch)
    return merged


def hoist_constants(block: ir.Block) -> None:
    """The block's top-level constants above its first other op, so that launches may move
    past them."""
    ops = [op.operation for op in block.operations]
    first = next(op for op in ops if op.name != "arith.constant")
    for op in ops[ops.index(first):]:
        if op.name == "arith.constant":
            op.move_before(first)


def merge(group: list[tuple]) -> tuple:
    """One launch running every launch of `group` on its own range of blocks, standing where
    the last of them stood."""
    nests = [nest for nest, _, _ in group]
    firsts = [sum(nest.grid for nest in nests[:k]) for k in range(len(nests))]
    grid, block = sum(nest.grid for nest in nests), max(nest.block for nest in nests)
    last = group[-1][1]
    with ir.InsertionPoint(last), last.location:
        blocks_loop, block_index, thread_index, thread_body = block_and_thread_loops(grid, block)
        dispatch(group, firsts, block_index, thread_index, block, list(thread_body.operations)[-1])
    for _, loop, _ in group:
        loop.erase()
    detail = f"{len(group)} independent launches as one ({', '.join(f'{n.grid}x{n.block}' for n in nests)}; launch_merging.py)"
    nest = MappedLoopNest(sum(n.elements for n in nests), grid, block, "loop.merged", detail)
    return nest, blocks_loop, thread_body


def dispatch(group: list[tuple], firsts: list[int], block_index: ir.Value, thread_index: ir.Value, block: int,
             before: ir.Operation) -> None:
    """Before `before`: the member of `group` whose blocks hold `block_index`, found by
    halving the group."""
    if len(group) == 1:
        run_member(group[0], firsts[0], block_index, thread_index, block, before)
        return
    half = len(group) // 2
    with ir.InsertionPoint(before):
        below = arith.CmpIOp(arith.CmpIPredicate.ult, block_index, index_constant(firsts[half])).result
        branch = scf.IfOp(below, has_else=True)
    with ir.InsertionPoint(branch.then_block):
        lower = scf.YieldOp([])
    with ir.InsertionPoint(branch.else_block):
        upper = scf.YieldOp([])
    dispatch(group[:half], firsts[:half], block_index, thread_index, block, lower.operation)
    dispatch(group[half:], firsts[half:], block_index, thread_index, block, upper.operation)


def run_member(launch: tuple, first: int, block_index: ir.Value, thread_index: ir.Value, block: int,
               before: ir.Operation) -> None:
    """Before `before`: the member's thread body, its block index `block_index - first`,
    guarded to its own block size."""
    nest, loop, _ = launch
    own_block = loop.regions[0].blocks[0]
    threads_loop = next(op.operation for op in own_block.operations if op.operation.name == "scf.parallel")
    own_threads = threads_loop.regions[0].blocks[0]
    with ir.InsertionPoint(before):
        local_block = block_index if first == 0 else arith.SubIOp(block_index, index_constant(first)).result
        if nest.block < block:
            inside = arith.CmpIOp(arith.CmpIPredicate.ult, thread_index, index_constant(nest.block)).result
            guard = scf.IfOp(inside)
            with ir.InsertionPoint(guard.then_block):
                before = scf.YieldOp([]).operation
    own_block.arguments[0].replace_all_uses_with(local_block)
    own_threads.arguments[0].replace_all_uses_with(thread_index)
    per_block = [op.operation for op in list(own_block.operations)[:-1] if op.operation != threads_loop]
    for op in per_block + [op.operation for op in list(own_threads.operations)[:-1]]:
        op.move_before(before)
