"""Consecutive loop nests of one kernel whose threads exchange nothing become one loop nest:
one launch instead of several.

linalg's lowering splits one fusion into several `scf.parallel` nests (a dot's fill of its
accumulator, the reduction, the epilogue, the copy into the caller's buffer: the benchmark
RNN's step was four launches of 128 threads), and the loop emitter makes each nest a launch.
On a GPU every launch costs microseconds and a dependent launch waits for the one before it
to drain, so XLA:GPU emits a loop fusion as one kernel. Two nests over the same iteration
space fuse when running them as one is the same as running them one after the other: every
buffer one of them writes and the other touches is touched, in both, only at the element of
the iteration's own index, one element per iteration (the address, a linear function of the
loop indices, the same in both nests and different for different iterations). Then thread
`t` of the fused nest needs only what thread `t` did before it, and a store followed by a load
of the same address in one thread is forwarded by LLVM rather than read back from memory.

What stands between the two nests (views, loaded offsets, index arithmetic) moves above the
first when it reads nothing the first writes; anything else between them (a store, a call)
keeps them apart, as does any access the analysis cannot read (a non-constant bound, an
address through a dynamic view or one that depends on a loaded value or an inner loop, an op
that takes a buffer and is neither a load nor a store).
"""

from dataclasses import dataclass

from mlirxla.ir_queries import is_inside
from mlirxla.mlir import ir

from . import loop_mapping

VIEWS = {"memref.expand_shape", "memref.collapse_shape", "memref.subview", "memref.cast", "memref.reinterpret_cast"}
ACCESSES = {"memref.load": 1, "memref.store": 2}  # op -> position of its memref operand's first index
MOVABLE = {"arith", "math", "index"}  # dialects whose ops have no memory effects
MOVABLE_OPS = VIEWS | {"memref.get_global", "memref.dim", "memref.load"}
CONSTANT = "1"  # the address term of the constant part


@dataclass(frozen=True)
class Access:
    root: ir.Value  # the argument or allocation the accessed memref views
    address: dict | None  # element offset from the root: {term: coefficient}; None where not known
    writes: bool


class NotFusable(Exception):
    pass


def fuse_loop_nests(function) -> int:
    """Fuse the consecutive top-level `scf.parallel` nests of `function` that qualify; the
    number of nests fused away."""
    block = function.regions[0].blocks[0]
    fused = 0
    current, between = None, []
    for op in list(block.operations):
        op = op.operation
        if op.name == "scf.parallel":
            if current is not None and fusable(current, op, between):
                for moved in between:
                    moved.move_before(current)
                merge_into(current, op)
                fused += 1
            else:
                current = op
            between = []
        elif current is not None and movable(op):
            between.append(op)
        else:
            current, between = None, []
    return fused


def movable(op: ir.Operation) -> bool:
    return op.name.split(".")[0] in MOVABLE or op.name in MOVABLE_OPS


def fusable(first: ir.Operation, second: ir.Operation, between: list[ir.Operation]) -> bool:
    if "mapping" in first.attributes or "mapping" in second.attributes:
        return False  # a block program (`block_programs.py`) is a launch as written
    try:
        trips = same_iteration_space(first, second)
        first_accesses, second_accesses = accesses(first), accesses(second)
    except NotFusable:
        return False
    written_first = {a.root for a in first_accesses if a.writes}
    written_second = {a.root for a in second_accesses if a.writes}
    for op in between:
        if op.name == "memref.load" and root_of(op.operands[0]) in written_first:
            return False
    shared = ({a.root for a in second_accesses} & written_first) | ({a.root for a in first_accesses} & written_second)
    for root in shared:
        addresses = [a.address for a in first_accesses + second_accesses if a.root == root]
        if any(address is None or address != addresses[0] for address in addresses):
            return False
        if not one_element_per_iteration(addresses[0], trips):
            return False
    return True


def same_iteration_space(first: ir.Operation, second: ir.Operation) -> list[int]:
    """The trip counts of two nests with equal constant bounds and no reductions."""
    if first.results or second.results or len(first.operands) != len(second.operands):
        raise NotFusable
    bounds = [constant(value) for value in first.operands]
    if bounds != [constant(value) for value in second.operands]:
        raise NotFusable
    rank = len(bounds) // 3
    return loop_mapping.trip_counts(bounds[:rank], bounds[rank:2 * rank], bounds[2 * rank:])


def constant(value: ir.Value) -> int:
    owner = value.owner
    if not isinstance(owner, ir.OpView) or owner.operation.name != "arith.constant":
        raise NotFusable
    return ir.IntegerAttr(owner.operation.attributes["value"]).value


def accesses(loop: ir.Operation) -> list[Access]:
    """Every load and store inside `loop`, its address in terms of the loop's indices."""
    indices = {argument: position for position, argument in enumerate(loop.regions[0].blocks[0].arguments)}
    found: list[Access] = []

    def visit(op):
        op = op.operation
        if op.name in ACCESSES:
            first_index = ACCESSES[op.name]
            memref = op.operands[first_index - 1]
            address = element_address(memref, list(op.operands)[first_index:], indices, loop)
            found.append(Access(root_of(memref), address, op.name == "memref.store"))
        elif op.name not in VIEWS and op.name != "memref.dim" and any(
                isinstance(operand.type, ir.MemRefType) for operand in op.operands):
            raise NotFusable
        return ir.WalkResult.ADVANCE

    loop.walk(visit)
    return found


def root_of(memref: ir.Value) -> ir.Value:
    while isinstance(memref.owner, ir.OpView) and memref.owner.operation.name in VIEWS:
        memref = memref.owner.operation.operands[0]
    return memref


def element_address(memref: ir.Value, index_values: list[ir.Value], indices: dict, loop: ir.Operation) -> dict | None:
    """The accessed element's offset from the start of the root buffer, {term: coefficient}
    over the loop's indices ("i0", "i1", ...), values defined outside the loop, and the
    constant part; None where the view's layout is not static or an index is not such a
    linear function (a view's static layout is relative to its root's start)."""
    strides, offset = ir.MemRefType(memref.type).get_strides_and_offset()
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    if offset == dynamic or dynamic in strides:
        return None
    address = {CONSTANT: offset} if offset else {}
    for value, stride in zip(index_values, strides):
        term = linear_form(value, indices, loop)
        if term is None:
            return None
        for key, coefficient in term.items():
            address[key] = address.get(key, 0) + coefficient * stride
    return {key: coefficient for key, coefficient in address.items() if coefficient}


def linear_form(value: ir.Value, indices: dict, loop: ir.Operation) -> dict | None:
    if value in indices:
        return {f"i{indices[value]}": 1}
    owner = value.owner
    if not isinstance(owner, ir.OpView):
        return None  # an inner loop's index
    op = owner.operation
    if op.name == "arith.constant":
        return {CONSTANT: ir.IntegerAttr(op.attributes["value"]).value}
    if not is_inside(op, loop):
        return {value: 1}
    if op.name in ("arith.addi", "arith.subi"):
        left, right = (linear_form(operand, indices, loop) for operand in op.operands)
        if left is None or right is None:
            return None
        sign = 1 if op.name == "arith.addi" else -1
        return {key: left.get(key, 0) + sign * right.get(key, 0) for key in left.keys() | right.keys()}
    if op.name == "arith.muli":
        left, right = (linear_form(operand, indices, loop) for operand in op.operands)
        for factor, term in ((left, right), (right, left)):
            if factor is not None and term is not None and set(factor) <= {CONSTANT}:
                scale = factor.get(CONSTANT, 0)
                return {key: coefficient * scale for key, coefficient in term.items()}
    return None


def one_element_per_iteration(address: dict, trips: list[int]) -> bool:
    """Whether `address` differs for any two iterations (its other terms are the same in
    every iteration): each index that varies has a coefficient larger than the span all
    smaller ones cover together (mixed radix), as a row-major layout's strides have."""
    varying = sorted((abs(address.get(f"i{d}", 0)), trip) for d, trip in enumerate(trips) if trip > 1)
    span = 0
    for coefficient, trip in varying:
        if coefficient <= span:
            return False
        span += coefficient * (trip - 1)
    return True


def merge_into(first: ir.Operation, second: ir.Operation) -> None:
    """`second`'s body after `first`'s, at `first`'s indices; `second` erased."""
    target, source = first.regions[0].blocks[0], second.regions[0].blocks[0]
    for argument, index in zip(source.arguments, target.arguments):
        argument.replace_all_uses_with(index)
    loop_mapping.move_body(source, target)
    second.erase()
