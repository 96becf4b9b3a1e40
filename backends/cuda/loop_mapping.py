"""Blocks and threads: every loop nest of a kernel function becomes one GPU launch over a
linear index (XLA:GPU's loop emitter: one thread per output element, a block of
`BLOCK_THREADS` threads, as many blocks as the elements need).

After bufferization a kernel function is a sequence of loop nests over the caller's buffers
(`convert-linalg-to-parallel-loops`: an `scf.parallel` over a generic's parallel dimensions,
`scf.for` inside it for its reduction dimensions). Each top-level `scf.parallel` becomes

    scf.parallel (%block) = (0) to (grid) { mapping block_x
      scf.parallel (%thread) = (0) to (block) { mapping thread_x
        %linear = %block * block + %thread
        scf.if %linear < total { ...the body at the delinearized indices... }

which `convert-parallel-loops-to-gpu` turns into a `gpu.launch`, and which `scf-to-cf` runs
sequentially on the host (how the tests check tiling and mapping without a GPU). A
top-level loop nest with no parallel dimension (a reduction to a scalar, the store of a
scalar) runs on one thread of one block. What a launch reads from the top level (loaded
offsets, views, constant globals) is then recomputed inside it (`sink_into`): only launches
stay on the host.

Parallel dimensions go first (`parallel_dimensions_first`): a column reduction, whose
generic iterates the reduced rows outside the kept columns, then gives one thread per
column, reading consecutive columns in consecutive threads.
"""

from dataclasses import dataclass

from mlirxla.errors import MlirxlaError
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import arith, ir, scf, vector

from .thread_program import index_constant

ALIGNED_POINTERS = 16  # bytes: every kernel pointer is a slab offset aligned to 256 (`compiler.SLAB_ALIGNMENT`)
BLOCK_THREADS = 256  # threads per block: 8 warps, XLA:GPU's default for loop fusions
VECTOR_WIDTH = 4  # consecutive elements per thread in a contiguous elementwise loop: 16 bytes of f32
# what a loop may recompute for itself: reads and arithmetic, no writes
SINKABLE = {"memref.load", "memref.get_global", "memref.subview", "memref.collapse_shape", "memref.expand_shape", "memref.reinterpret_cast",
            "memref.cast", "arith.index_cast", "arith.maxsi", "arith.minsi", "arith.maxui", "arith.minui", "arith.addi",
            "arith.subi", "arith.muli", "arith.divsi", "arith.divui", "arith.remsi", "arith.remui", "arith.select",
            "arith.cmpi", "arith.extsi", "arith.extui", "arith.trunci", "affine.apply", "affine.min", "affine.max"}
VIEW_OPS = {"memref.collapse_shape", "memref.expand_shape", "memref.subview", "memref.reinterpret_cast", "memref.cast",
            "arith.constant", "func.return", "memref.get_global"}


@dataclass(frozen=True)
class MappedLoopNest:
    """One loop nest as a launch: `elements` threads do work, in `grid` blocks of `block`;
    `emitter` names what made it (`loop`, `row`, `column`; the tiling in `detail`)."""

    elements: int
    grid: int
    block: int
    emitter: str = "loop"
    detail: str = ""
    tunable: object = None  # an emitter's launch the autotuner may time (`autotune.Tunable`)


def parallel_dimensions_first(module: ir.Module) -> None:
    """Permute every buffer-semantics `linalg.generic` so that its parallel dimensions come
    before its reduction dimensions (order kept within each kind)."""
    for generic in ops_named(module, "linalg.generic"):
        if any(inner.operation.name == "linalg.index" for inner in generic.regions[0].blocks[0].operations):
            continue
        iterators = list(ir.ArrayAttr(generic.attributes["iterator_types"]))
        kinds = ["parallel" in str(attr) for attr in iterators]
        order = [d for d, parallel in enumerate(kinds) if parallel] + [d for d, parallel in enumerate(kinds) if not parallel]
        if order == list(range(len(order))):
            continue
        position = {old: new for new, old in enumerate(order)}
        count = len(order)
        substitution = ir.AffineMap.get(count, 0, [ir.AffineDimExpr.get(position[d]) for d in range(count)])
        maps = [ir.AffineMapAttr(attr).value for attr in ir.ArrayAttr(generic.attributes["indexing_maps"])]
        new_maps = [ir.AffineMap.get(count, 0, [e.compose(substitution) for e in m.results]) for m in maps]
        generic.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in new_maps])
        generic.attributes["iterator_types"] = ir.ArrayAttr.get([iterators[d] for d in order])


def map_loop_nests(module: ir.Module, symbol: str, emitted: list | None = None, host: bool = False,
                   merge=None) -> list[MappedLoopNest]:
    """Map every top-level loop nest of every function to blocks and threads, in order, then
    let each launch recompute what it reads from the top level (`sink_into`). `emitted` are
    launches an emitter made already: (mapping, its block loop, the block it reads in).
    `merge` may then turn a function's launches into fewer (`launch_merging.py`)."""
    emitted = emitted or []
    mapped = []
    for function in ops_named(module, "func.func"):
        block = function.regions[0].blocks[0]
        launches = []  # (mapping, the launch's outer loop, the block its work is in)
        run: list[ir.Operation] = []  # consecutive ops outside any parallel loop: one thread's work
        for op in list(block.operations):
            op = op.operation
            if op.name in VIEW_OPS or op.name in SINKABLE:
                continue  # recomputed where it is read
            if op.name == "memref.alloca":
                continue  # the host emulation's workgroup memory (`thread_program.py`), read by the loops as it is
            made = next((launch for launch in emitted if launch[1] == op), None)
            if made is not None:
                if run:
                    launches.append(map_single_thread(run))
                    run = []
                launches.append(made)
            elif op.name == "scf.parallel":
                if run:
                    launches.append(map_single_thread(run))
                    run = []
                launches.append(map_parallel(op, symbol, host))
            else:
                run.append(op)
        if run:
            launches.append(map_single_thread(run))
        top_level = {op.operation for op in block.operations}
        for _, loop, target in launches:
            sink_into(loop, target, top_level)
        if merge is not None:
            launches = merge(launches)
        erase_unused(block)
        mapped += [nest for nest, _, _ in launches]
    return mapped


def sink_into(loop: ir.Operation, target: ir.Block, top_level: set) -> None:
    """Clone into a launch the top-level computations its work reads (a dynamic slice's
    offsets loaded from a buffer, the view they make, a constant array's global, which
    outlining then copies into the kernel's module), each right before its first reader, so
    that a launch is a kernel on its own and reads what it reads in program order."""
    needed = []
    collect_needed(loop, top_level, needed, set())
    for op in reversed(needed):  # readers first: a clone's operands are then placed before it
        reader = first_reader(target, set(op.results)) or list(target.operations)[-1]
        clone = op.clone(ir.InsertionPoint(reader))
        replace_uses_inside(loop, dict(zip(op.results, clone.results)))


def first_reader(block: ir.Block, values: set):
    for op in block.operations:
        if any(operand in values for operand in operands_within(op.operation)):
            return op.operation
    return None


def collect_needed(op: ir.Operation, top_level: set, needed: list, seen: set) -> None:
    """The top-level, non-constant ops whose results `op` (its regions included) reads,
    operands before users."""
    for operand in operands_within(op):
        owner = operand.owner
        if not isinstance(owner, ir.OpView):
            continue
        producer = owner.operation
        if producer not in top_level or producer.name == "arith.constant" or producer in seen:
            continue
        if producer.name not in SINKABLE:
            continue
        seen.add(producer)
        collect_needed(producer, top_level, needed, seen)
        needed.append(producer)


def operands_within(op: ir.Operation) -> list[ir.Value]:
    values = list(op.operands)
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                values.extend(operands_within(inner.operation))
    return values


def replace_uses_inside(loop: ir.Operation, mapping: dict) -> None:
    for region in loop.regions:
        for block in region.blocks:
            for inner in block.operations:
                inner = inner.operation
                for index, operand in enumerate(inner.operands):
                    if operand in mapping:
                        inner.operands[index] = mapping[operand]
                replace_uses_inside(inner, mapping)


def erase_unused(block: ir.Block) -> None:
    for op in reversed([op.operation for op in block.operations]):
        if op.name in SINKABLE and op.results and all(not list(result.uses) for result in op.results):
            op.erase()


def constant_index(value: ir.Value, symbol: str) -> int:
    owner = value.owner
    if not isinstance(owner, ir.OpView) or owner.operation.name != "arith.constant":
        raise MlirxlaError(f"kernel {symbol}: a loop bound is not a constant (dynamic shapes are not mapped to threads)")
    return ir.IntegerAttr(owner.operation.attributes["value"]).value


def map_parallel(loop: ir.Operation, symbol: str, host: bool = False) -> tuple[MappedLoopNest, ir.Operation, ir.Block]:
    if loop.results:
        raise MlirxlaError(f"kernel {symbol}: a parallel loop with reductions is not mapped to threads")
    rank = len(loop.regions[0].blocks[0].arguments)
    bounds = [constant_index(v, symbol) for v in loop.operands[:3 * rank]]
    lower, upper, step = bounds[:rank], bounds[rank:2 * rank], bounds[2 * rank:]
    trips = trip_counts(lower, upper, step)
    total = 1
    for trip in trips:
        total *= trip
    body = loop.regions[0].blocks[0]
    width = VECTOR_WIDTH if vectorizable(body, trips, lower, step) else 1
    with ir.InsertionPoint(loop), loop.location:
        nest, outer, linear, target = launch_skeleton(total // width)
        with ir.InsertionPoint.at_block_terminator(target):
            indices = delinearize(linear, trips[:-1] + [trips[-1] // width], lower, step)
            if width == 1:
                lanes = [indices]
            else:  # element k of the thread's `width` consecutive ones along the minor dimension
                first = arith.MulIOp(indices[-1], arith.ConstantOp(ir.IndexType.get(), width).result).result
                lanes = [indices[:-1] + [arith.AddIOp(first, arith.ConstantOp(ir.IndexType.get(), k).result).result if k else first]
                         for k in range(width)]
        if width == 1:
            for argument, index in zip(body.arguments, indices):
                argument.replace_all_uses_with(index)
            move_body(body, target)
        else:
            interleave_body(body, target, lanes, vectors=not host)
            nest = MappedLoopNest(total, nest.grid, nest.block, "loop.v4", f"{width} consecutive elements per thread")
    loop.erase()
    return nest, outer, target


def trip_counts(lower: list[int], upper: list[int], step: list[int]) -> list[int]:
    """Each dimension's iteration count of a loop with these constant bounds."""
    return [max(0, -(-(u - l) // s)) for l, u, s in zip(lower, upper, step)]


def vectorizable(body: ir.Block, trips: list[int], lower: list[int], step: list[int]) -> bool:
    """Whether each thread may take VECTOR_WIDTH consecutive elements along the minor
    dimension, which every store writes contiguously (unit stride): then the stores, and the
    loads along the minor dimension, are `vector.load`/`vector.store` of 4 elements, which
    LLVM emits as `ld.global.v4`/`st.global.v4` where it proves 16-byte alignment (kernel
    pointers are aligned: `ALIGNED_POINTERS`). Bodies with nested regions (loops,
    branches) keep one element per thread."""
    if not trips or trips[-1] % VECTOR_WIDTH or lower[-1] != 0 or step[-1] != 1:
        return False
    minor = body.arguments[len(trips) - 1]
    stores = 0
    for op in list(body.operations)[:-1]:
        op = op.operation
        if len(op.regions):
            return False
        if op.name == "memref.store":
            stores += 1
            indices = list(op.operands)[2:]
            if not indices or indices[-1] != minor or minor in indices[:-1] or not contiguous(op.operands[1].type):
                return False
    return stores > 0


def contiguous(kind: ir.Type) -> bool:
    """A memref whose minor dimension has unit stride, of elements a vector can hold."""
    memref = ir.MemRefType(kind)
    element = memref.element_type
    if not isinstance(element, (ir.F16Type, ir.BF16Type, ir.F32Type, ir.F64Type, ir.IntegerType)) or \
            (isinstance(element, ir.IntegerType) and element.width < 8):
        return False
    strides, _ = memref.get_strides_and_offset()
    return bool(strides) and strides[-1] == 1


def along_minor(op: ir.Operation, minor: ir.Value, first: int) -> bool:
    indices = list(op.operands)[first:]
    return bool(indices) and indices[-1] == minor and minor not in indices[:-1] and contiguous(op.operands[first - 1].type)


def interleave_body(body: ir.Block, target: ir.Block, lanes: list[list[ir.Value]], vectors: bool) -> None:
    """The loop body once per element of `lanes` (each its loop indices), op by op: every op's
    copies are neighbours. The iterations of a parallel loop are independent, so any
    interleaving of them is theirs. With `vectors`, loads and stores along the minor
    dimension are one `vector.load`/`vector.store` for all lanes (the host reads the lanes
    one by one: the same elements to the same threads)."""
    terminator = list(target.operations)[-1]
    minor = body.arguments[len(lanes[0]) - 1]
    mappings = [dict(zip(body.arguments, indices)) for indices in lanes]
    at = ir.InsertionPoint(terminator)

    def mapped(value, mapping):
        return mapping.get(value, value)

    for op in list(body.operations)[:-1]:
        op = op.operation
        if vectors and op.name == "memref.load" and along_minor(op, minor, 1):
            kind = ir.VectorType.get([len(lanes)], op.results[0].type)
            indices = [mapped(v, mappings[0]) for v in list(op.operands)[1:]]
            load = vector.LoadOp(kind, mapped(op.operands[0], mappings[0]), indices, ip=at)
            declare_alignment(load.operation, op.operands[0].type, len(lanes))
            loaded = load.result
            for k, mapping in enumerate(mappings):
                mapping[op.results[0]] = vector.ExtractOp(loaded, [], [k], ip=at).result
            continue
        if vectors and op.name == "memref.store" and along_minor(op, minor, 2):
            kind = ir.VectorType.get([len(lanes)], op.operands[0].type)
            values = vector.FromElementsOp(kind, [mapped(op.operands[0], mapping) for mapping in mappings], ip=at).result
            store = vector.StoreOp(values, mapped(op.operands[1], mappings[0]), [mapped(v, mappings[0]) for v in list(op.operands)[2:]], ip=at)
            declare_alignment(store.operation, op.operands[1].type, len(lanes))
            continue
        for mapping in mappings:
            clone = op.clone(at)
            for index, operand in enumerate(clone.operands):
                if operand in mapping:
                    clone.operands[index] = mapping[operand]
            mapping.update(zip(op.results, clone.results))


def declare_alignment(access: ir.Operation, memref_type: ir.Type, width: int) -> None:
    """Tell LLVM a vector access is aligned to its size (up to the kernel pointers'
    `ALIGNED_POINTERS`) where the view's offset and every stride but the minor one are
    multiples of the vector's width: its first element is then a multiple of the width from
    the aligned pointer (the lanes start at 4 x thread). LLVM infers this for plain buffers but
    not through views of several dimensions, and split such stores into 4 scalar ones."""
    memref = ir.MemRefType(memref_type)
    strides, offset = memref.get_strides_and_offset()
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    if offset == dynamic or dynamic in strides or offset % width or any(stride % width for stride in strides[:-1]):
        return
    element_bytes = max(1, memref.element_type.width // 8)
    alignment = min(ALIGNED_POINTERS, element_bytes * width)
    access.attributes["alignment"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), alignment)


def map_single_thread(ops: list[ir.Operation]) -> tuple[MappedLoopNest, ir.Operation, ir.Block]:
    """Consecutive ops with no parallel loop (a reduction to a scalar, scalar arithmetic) as
    one thread of one block."""
    with ir.InsertionPoint(ops[0]), ops[0].location:
        nest, outer, _, target = launch_skeleton(1)
    terminator = list(target.operations)[-1]
    for op in ops:
        op.move_before(terminator)
    return nest, outer, target


def launch_skeleton(total: int) -> tuple[MappedLoopNest, ir.Operation, ir.Value, ir.Block]:
    """The block and thread loops over `total` elements at the insertion point; returns the
    mapping, the block loop, the linear index and the block the body goes in (ending in its
    terminator)."""
    block_size = max(1, min(BLOCK_THREADS, total))
    grid = max(1, -(-total // block_size))
    blocks_loop, block_index, thread_index, thread_body = block_and_thread_loops(grid, block_size)
    with ir.InsertionPoint.at_block_terminator(thread_body):
        linear = arith.AddIOp(arith.MulIOp(block_index, index_constant(block_size)).result, thread_index).result
        if total % block_size:
            inside = arith.CmpIOp(arith.CmpIPredicate.ult, linear, index_constant(total)).result
            guard = scf.IfOp(inside)
            with ir.InsertionPoint(guard.then_block):
                scf.YieldOp([])
            target = guard.then_block
        else:
            target = thread_body
    return MappedLoopNest(total, grid, block_size), blocks_loop, linear, target


def block_and_thread_loops(grid: int, block_size: int) -> tuple[ir.Operation, ir.Value, ir.Value, ir.Block]:
    """`scf.parallel` over `grid` blocks holding one over `block_size` threads, at the
    insertion point: the block loop, the block and thread indices, and the thread loop's body
    (ending in its terminator)."""
    zero, one, threads = index_constant(0), index_constant(1), index_constant(block_size)
    blocks_loop = scf.ParallelOp([], [zero], [index_constant(grid)], [one], [])
    blocks_loop.attributes["mapping"] = ir.Attribute.parse(f"[{dimension_map('block_x')}]")
    block_body = blocks_loop.regions[0].blocks.append(ir.IndexType.get())
    with ir.InsertionPoint(block_body):
        threads_loop = scf.ParallelOp([], [zero], [threads], [one], [])
        threads_loop.attributes["mapping"] = ir.Attribute.parse(f"[{dimension_map('thread_x')}]")
        thread_body = threads_loop.regions[0].blocks.append(ir.IndexType.get())
        ir.Operation.create("scf.reduce")
    with ir.InsertionPoint(thread_body):
        ir.Operation.create("scf.reduce")
    return blocks_loop.operation, block_body.arguments[0], thread_body.arguments[0], thread_body


def dimension_map(processor: str) -> str:
    return f"#gpu.loop_dim_map<processor = {processor}, map = (d0) -> (d0), bound = (d0) -> (d0)>"


def delinearize(linear: ir.Value, trips: list[int], lower: list[int], step: list[int]) -> list[ir.Value]:
    """The loop indices of a row-major linear index (the last dimension fastest)."""
    index = ir.IndexType.get()
    indices = [None] * len(trips)
    rest = linear
    for d in reversed(range(len(trips))):
        trip = arith.ConstantOp(index, trips[d]).result
        position = arith.RemUIOp(rest, trip).result if d else rest
        if d:
            rest = arith.DivUIOp(rest, trip).result
        if step[d] != 1:
            position = arith.MulIOp(position, arith.ConstantOp(index, step[d]).result).result
        if lower[d]:
            position = arith.AddIOp(position, arith.ConstantOp(index, lower[d]).result).result
        indices[d] = position
    return indices


def move_body(source: ir.Block, target: ir.Block) -> None:
    """The ops of a loop body, but its terminator, to before `target`'s terminator."""
    terminator = list(target.operations)[-1]
    for op in list(source.operations)[:-1]:
        op.operation.move_before(terminator)
