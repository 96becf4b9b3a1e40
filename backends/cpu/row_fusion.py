"""Row fusion: sibling loop nests over the same rows run as one nest, so that a row reduction
and the elementwise passes around it (a softmax's max, exp, sum and divide) take one row at
a time through all of them while it is in the L1 cache, instead of streaming the whole
operand from memory once per pass.

`convert-linalg-to-loops` makes one loop nest per linalg op, in program order. A softmax over
rows of 1024 is then four nests over all the rows: a slice of 8 MiB is read four times and
written twice, three times the traffic of one read and one write. Fused at the rows' loop
(and, in a nest of several parallel loops, at every level where the nests still agree), a
row is loaded from memory once and the later passes read it from the cache.

Two adjacent `scf.for` loops with the same bounds fuse (the second's body moved after the
first's, its induction variable replaced) when iteration i of one never touches what
iteration j != i of the other touches, so running them interleaved keeps every dependence:
for every buffer either loop writes, every access of it in both loops has the loop's
induction variable at the same index position (different values there are different
elements of one view). With the variable in position 0, views of the buffer (`expand_shape`, `collapse_shape` of the
argument: contiguous, row-major) may differ in shape as long as they agree on the number of
rows and the total size, which makes row i the same bytes in every view; deeper, the views
must have the same type. Kernel arguments not marked noalias may be the same buffer (an
operand updated in place), so such arguments of the same size count as one buffer. A loop
holding anything but arithmetic, math, scf loops and memref loads and stores is left alone,
and so are loops with ops between them that are not pure views or constants (those are moved
above the first loop).
"""

from dataclasses import dataclass

from mlirxla.mlir import ir

VIEWS = ("memref.expand_shape", "memref.collapse_shape")
MOVABLE_BETWEEN = VIEWS + ("arith.constant",)
ALLOWED_DIALECTS = ("arith.", "math.")
ALLOWED_OPS = ("scf.for", "scf.yield", "scf.if", "memref.load", "memref.store") + VIEWS


@dataclass(frozen=True)
class Access:
    memref: ir.Value
    indices: tuple
    writes: bool


def fuse_rows(module: ir.Module) -> int:
    """Fuse sibling row loops in every function of `module`; the number of fusions made."""
    fused = 0
    for function in module.body.operations:
        if function.operation.name == "func.func" and function.regions[0].blocks:
            fused += fuse_in_block(function.regions[0].blocks[0])
    return fused


def fuse_in_block(block: ir.Block) -> int:
    fused = 0
    loops = [op.operation for op in block.operations if op.operation.name == "scf.for"]
    index = 0
    while index < len(loops) - 1:
        first, second = loops[index], loops[index + 1]
        if fusible(first, second):
            merge(first, second)
            loops.pop(index + 1)
            fused += 1
        else:
            index += 1
    for loop in loops:
        fused += fuse_in_block(loop.regions[0].blocks[0])
    return fused


def fusible(first: ir.Operation, second: ir.Operation) -> bool:
    if not same_bounds(first, second) or first.results or second.results:
        return False
    if not all(op.name in MOVABLE_BETWEEN for op in ops_between(first, second)):
        return False
    accesses = []
    for loop in (first, second):
        found = loop_accesses(loop)
        if found is None:
            return False
        accesses.append((loop, found))
    return rows_apart(accesses)


def same_bounds(first: ir.Operation, second: ir.Operation) -> bool:
    return all(same_index(a, b) for a, b in zip(list(first.operands)[:3], list(second.operands)[:3]))


def same_index(a: ir.Value, b: ir.Value) -> bool:
    if a == b:
        return True
    return constant_of(a) is not None and constant_of(a) == constant_of(b)


def constant_of(value: ir.Value) -> int | None:
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "arith.constant":
        return None
    return ir.IntegerAttr(owner.attributes["value"]).value


def ops_between(first: ir.Operation, second: ir.Operation) -> list[ir.Operation]:
    between = []
    block_ops = list(first.block.operations)
    position = next(i for i, op in enumerate(block_ops) if op.operation == first)
    for op in block_ops[position + 1:]:
        if op.operation == second:
            return between
        between.append(op.operation)
    return between


def loop_accesses(loop: ir.Operation) -> list[Access] | None:
    """The loads and stores under `loop`, or None when it holds an op this fusion does not know."""
    accesses: list[Access] = []
    unknown = []

    def visit(op):
        name = op.operation.name
        if name == "memref.load":
            accesses.append(Access(op.operands[0], tuple(op.operands[1:]), False))
        elif name == "memref.store":
            accesses.append(Access(op.operands[1], tuple(op.operands[2:]), True))
        elif not (name in ALLOWED_OPS or name.startswith(ALLOWED_DIALECTS)):
            unknown.append(name)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    for op in loop.regions[0].blocks[0].operations:
        op.operation.walk(visit)
    return None if unknown else accesses


def buffer_of(memref: ir.Value) -> object | None:
    """What `memref` is a view of, as one buffer: a noalias kernel argument itself, other
    arguments by their size (they may be the same buffer); None for anything else."""
    while not isinstance(memref.owner, ir.Block) and memref.owner.operation.name in VIEWS:
        memref = memref.owner.operands[0]
    if not isinstance(memref.owner, ir.Block) or not isinstance(memref, ir.BlockArgument):
        return None
    block = memref.owner
    function = block.owner
    if function is None or function.operation.name != "func.func" or not plain(memref.type):
        return None
    argument = ir.BlockArgument(memref)
    if "arg_attrs" in function.attributes:
        attrs = ir.DictAttr(ir.ArrayAttr(function.attributes["arg_attrs"])[argument.arg_number])
        if "llvm.noalias" in attrs:
            return ("noalias", argument.arg_number)
    return ("argument", byte_size(memref.type))


def plain(memref_type: ir.Type) -> bool:
    """A static, contiguous row-major memref."""
    shaped = ir.MemRefType(memref_type)
    layout = shaped.layout
    return (shaped.has_static_shape and isinstance(layout, ir.AffineMapAttr)
            and layout.value == ir.AffineMap.get_identity(shaped.rank))


def byte_size(memref_type: ir.Type) -> int:
    shaped = ir.MemRefType(memref_type)
    width = max(shaped.element_type.width if hasattr(shaped.element_type, "width") else 8, 8)
    count = 1
    for size in shaped.shape:
        count *= size
    return count * width // 8


def rows_apart(loop_accesses_pairs: list[tuple[ir.Operation, list[Access]]]) -> bool:
    """Whether, for every buffer written in either loop, each access of it puts the loop's
    induction variable at one index position (and the views agree on what a row is)."""
    by_buffer: dict = {}
    for loop, accesses in loop_accesses_pairs:
        variable = loop.regions[0].blocks[0].arguments[0]
        for access in accesses:
            buffer = buffer_of(access.memref)
            by_buffer.setdefault(buffer, []).append((variable, access))
    for buffer, uses in by_buffer.items():
        if not any(access.writes for _, access in uses):
            continue
        if buffer is None:
            return False
        if not same_row_everywhere(uses):
            return False
    return True


def same_row_everywhere(uses: list[tuple[ir.Value, Access]]) -> bool:
    positions, types = set(), set()
    for variable, access in uses:
        position = next((p for p, index in enumerate(access.indices) if index == variable), None)
        if position is None:
            return False
        positions.add(position)
        types.add(str(access.memref.type))
    if len(positions) != 1:
        return False
    if positions == {0}:
        shapes = [ir.MemRefType(access.memref.type) for _, access in uses]
        return (len({shape.shape[0] for shape in shapes}) == 1
                and len({byte_size(access.memref.type) for _, access in uses}) == 1)
    return len(types) == 1


def merge(first: ir.Operation, second: ir.Operation) -> None:
    """Move the ops between the loops above the first, then the second's body into the first."""
    for op in ops_between(first, second):
        op.move_before(first)
    target = first.regions[0].blocks[0]
    source = second.regions[0].blocks[0]
    source.arguments[0].replace_all_uses_with(target.arguments[0])
    terminator = list(target.operations)[-1]
    for op in list(source.operations)[:-1]:
        op.operation.move_before(terminator)
    second.erase()
