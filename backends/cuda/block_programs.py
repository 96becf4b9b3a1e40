"""Kernels written as block programs: an `scf.parallel` already mapped to `block_x` whose body
is a sequence of loops mapped to `thread_x`, all over the same threads, reading and writing
`memref.alloca`s of the function's top level (a whole sort's tiles: `bitonic_sort.py`).

That is the host flavour of `thread_program.py` written out: each thread loop a phase, every
thread finishing one before any starts the next, the allocas the block's workgroup memory,
which the blocks, running one after another, reuse. On the host it runs as it is. For the
GPU the phases become one thread loop with a `gpu.barrier` between them (what the host's
loop fission undid) and each alloca a `memref.global` in the workgroup address space
(`.shared`), read through `memref.get_global` inside the launch; an alloca no launch reads
any more is erased. Values do not flow between phases but through memory: each phase
recomputes what it needs from the block and thread indices, which is what makes the two
flavours the same program.
"""

from mlirxla.errors import MlirxlaError
from mlirxla.ir_queries import nested_ops, ops_named
from mlirxla.mlir import gpu, ir, memref

from .loop_mapping import MappedLoopNest, constant_index, replace_uses_inside
from .thread_program import WORKGROUP

EMITTER = "tiles"


def is_block_program(op: ir.Operation) -> bool:
    return op.name == "scf.parallel" and "mapping" in op.attributes and "block_x" in str(op.attributes["mapping"])


def map_block_programs(module: ir.Module, symbol: str, host: bool) -> list[tuple[MappedLoopNest, ir.Operation, ir.Block]]:
    """Every top-level block program of the module's functions as a launch
    (`loop_mapping.map_loop_nests` takes them as made)."""
    return [map_block_program(op.operation, module.body, symbol, host)
            for function in ops_named(module, "func.func") for op in function.regions[0].blocks[0].operations
            if is_block_program(op.operation)]


def map_block_program(loop: ir.Operation, module_body: ir.Block, symbol: str, host: bool) -> tuple[MappedLoopNest, ir.Operation, ir.Block]:
    """The block program `loop` as a launch: (mapping, its block loop, the block its work
    reads in); for the GPU, its phases joined by barriers and its allocas made shared."""
    body = loop.regions[0].blocks[0]
    phases = [op.operation for op in list(body.operations)[:-1]]
    if not phases or any(op.name != "scf.parallel" or "thread_x" not in str(op.attributes["mapping"]) for op in phases):
        raise MlirxlaError(f"kernel {symbol}: a block program holds something besides loops over its threads")
    grid = thread_count(loop, symbol)
    block = thread_count(phases[0], symbol)
    if any(thread_count(phase, symbol) != block for phase in phases):
        raise MlirxlaError(f"kernel {symbol}: the phases of a block program run different numbers of threads")
    nest = MappedLoopNest(grid * block, grid, block, EMITTER, f"a block program of {len(phases)} phase(s)")
    if host:
        return nest, loop, body
    joined = join_phases(phases)
    share_allocas(loop, joined, module_body, symbol)
    return nest, loop, joined


def thread_count(loop: ir.Operation, symbol: str) -> int:
    lower, upper, step = (constant_index(value, symbol) for value in loop.operands[:3])
    if len(loop.regions[0].blocks[0].arguments) != 1 or lower != 0 or step != 1:
        raise MlirxlaError(f"kernel {symbol}: a block program's loops are not over [0, n) in one dimension")
    return upper


def join_phases(phases: list[ir.Operation]) -> ir.Block:
    """The phases as the first one's loop, each later phase's body after a barrier; returns
    that loop's body."""
    first = phases[0]
    body = first.regions[0].blocks[0]
    thread = body.arguments[0]
    terminator = list(body.operations)[-1]
    for phase in phases[1:]:
        with ir.InsertionPoint(terminator), first.location:
            gpu.BarrierOp()
        later = phase.regions[0].blocks[0]
        later.arguments[0].replace_all_uses_with(thread)
        for op in list(later.operations)[:-1]:
            op.operation.move_before(terminator)
        phase.erase()
    return body


def share_allocas(loop: ir.Operation, body: ir.Block, module_body: ir.Block, symbol: str) -> None:
    """Every top-level alloca `loop` reads or writes as a workgroup global of the launch."""
    allocas = {}
    for op in nested_ops(loop):
        for operand in op.operands:
            owner = operand.owner
            if isinstance(owner, ir.OpView) and owner.operation.name == "memref.alloca":
                allocas[owner.operation] = operand
    first = list(body.operations)[0]
    globals_made = sum(1 for op in module_body.operations if op.operation.name == "memref.global")
    for number, (alloca, value) in enumerate(allocas.items(), globals_made):
        allocated = ir.MemRefType(value.type)
        shared = ir.MemRefType.get(allocated.shape, allocated.element_type, memory_space=ir.Attribute.parse(WORKGROUP))
        name = f"{symbol}_shared_{number}"
        with ir.InsertionPoint.at_block_begin(module_body), loop.location:
            memref.GlobalOp(name, ir.TypeAttr.get(shared), sym_visibility="private")
        with ir.InsertionPoint(first), loop.location:
            replacement = memref.GetGlobalOp(shared, name).result
        replace_uses_inside(loop, {value: replacement})
        if not list(value.uses):
            alloca.erase()
