"""A float sum over several dimensions adds each row into a partial sum of its own.

linalg's loops for a reduction over several dimensions (`jnp.sum` of a matrix) carry one
accumulator, the result element, through every loop: `out += x[i, j]` for all i, j. LLVM
vectorizes the innermost loop with the accumulator as the start of lane 0, so lane 0 adds
its elements of every row to the running total of all earlier rows: a 500x500 matrix of 500s
summed to 124992592 instead of 125000000, a 4000x4000 uniform one with a relative error of
1.8e-6, where XLA:CPU (whose `TreeReductionRewriter` sums windows of 32 first) has 8e-10
and a flat array of the same elements sums exactly here too.

Each reduction loop nested directly in another reduction loop into the same element now
starts from the sum's identity (-0.0: x + -0.0 is x for every x) and adds its partial to the
total when it ends: `saved = out; out = -0.0; <loop>; out = saved + out`. The partials
are the size of a row, as those of a flat sum's lanes are. XLA reduces in any order, so the
order changes no answer jax may rely on. A loop is wrapped when its own iterations and those
of the loops inside it number 16 or more: a shorter row is unrolled, and one more add per
row would cost as much as its own.

Runs on the bufferized loops (after `convert-linalg-to-loops`), where the accumulator is a
`memref.load` of the result element, an `arith.addf` and a `memref.store` back to it, the
result touched nowhere else in the loop and viewed nowhere (a view could alias the
element); the element's indices are defined outside both loops.
"""

from mlirxla.mlir import ir

MIN_ROW = 16
NEGATIVE_ZERO = -0.0


def add_rows_into_partial_sums(module: ir.Module) -> int:
    """Wrap every reduction loop nested in a reduction loop into the same element; how many."""
    wrapped = 0
    for loop in nested_loops(module):
        accumulator = float_sum_accumulator(loop)
        if accumulator is not None:
            with ir.InsertionPoint(loop), loop.location:
                wrap(loop, *accumulator)
            wrapped += 1
    return wrapped


def nested_loops(module: ir.Module) -> list[ir.Operation]:
    """Every `scf.for` whose parent op is an `scf.for` too."""
    loops = []

    def visit(op):
        if op.name == "scf.for" and op.parent is not None and op.parent.name == "scf.for":
            loops.append(op.operation)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)  # outer loops first: wrapping one adds uses
    return loops


def float_sum_accumulator(loop: ir.Operation):
    """(memref, indices, load, store) when `loop` and its parent loop only add float values
    into one element of a memref, and `loop` runs `MIN_ROW` iterations or more; else None."""
    parent = loop.parent.operation
    if trip_count(loop) < MIN_ROW:
        return None
    stores = [op for op in ops_inside(loop) if op.name == "memref.store"]
    for store in stores:
        value, memref, indices = store.operands[0], store.operands[1], list(store.operands)[2:]
        add = defining_op(value)
        if not isinstance(value.type, ir.FloatType) or add is None or add.name != "arith.addf":
            continue
        if not all(defined_outside(index, parent) for index in indices):
            continue
        loads = [defining_op(operand) for operand in add.operands]
        loads = [load for load in loads if load is not None and load.name == "memref.load"
                 and load.operands[0] == memref and list(load.operands)[1:] == indices]
        if len(loads) != 1 or len(list(add.results[0].uses)) != 1 or len(list(loads[0].results[0].uses)) != 1:
            continue
        users = [use.owner.operation for use in memref.uses]
        inner_users = [user for user in users if inside(user, parent)]
        views = [user for user in users if any(isinstance(result.type, ir.MemRefType) for result in user.results)]
        if len(inner_users) == 2 and loads[0] in inner_users and store in inner_users and not views:
            return memref, indices, loads[0], store
    return None


def trip_count(loop: ir.Operation) -> int:
    """Iterations of `loop` times those of the loops inside it (constant bounds), 0 if unknown."""
    bounds = [constant_index(operand) for operand in list(loop.operands)[:3]]
    if None in bounds or bounds[2] <= 0:
        return 0
    lower, upper, step = bounds
    count = max(0, -(-(upper - lower) // step))
    inner = [op for op in loop.regions[0].blocks[0].operations if op.name == "scf.for"]
    return count * max([trip_count(op) for op in inner], default=1)


def constant_index(value: ir.Value) -> int | None:
    owner = defining_op(value)
    if owner is not None and owner.name == "arith.constant":
        return ir.IntegerAttr(owner.attributes["value"]).value
    return None


def defining_op(value: ir.Value) -> ir.Operation | None:
    """The operation defining `value`, None for a block argument."""
    owner = value.owner
    return None if isinstance(owner, ir.Block) else owner.operation


def ops_inside(op: ir.Operation) -> list[ir.Operation]:
    found = []

    def visit(inner):
        found.append(inner.operation)
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return found


def inside(op: ir.Operation, ancestor: ir.Operation) -> bool:
    while op is not None:
        if op == ancestor:
            return True
        op = op.parent.operation if op.parent is not None else None
    return False


def defined_outside(value: ir.Value, loop: ir.Operation) -> bool:
    owner = value.owner
    owner = owner.owner if isinstance(owner, ir.Block) else owner.operation
    return not inside(owner, loop)


def wrap(loop: ir.Operation, memref: ir.Value, indices: list[ir.Value], load: ir.Operation, store: ir.Operation) -> None:
    """`saved = out; out = -0.0; <loop>; out = saved + out` around `loop`, before it and after it."""
    element = load.results[0].type
    saved = ir.Operation.create("memref.load", results=[element], operands=[memref, *indices]).result
    identity = ir.Operation.create("arith.constant", results=[element],
                                   attributes={"value": ir.FloatAttr.get(element, NEGATIVE_ZERO)}).result
    ir.Operation.create("memref.store", operands=[identity, memref, *indices])
    with ir.InsertionPoint.after(loop):
        partial = ir.Operation.create("memref.load", results=[element], operands=[memref, *indices]).result
        total = ir.Operation.create("arith.addf", results=[element], operands=[saved, partial],
                                    attributes=attributes_of(defining_op(store.operands[0]))).result
        ir.Operation.create("memref.store", operands=[total, memref, *indices])


def attributes_of(op: ir.Operation) -> dict:
    """`op`'s attributes (the add's fastmath flags), to give the add of the partial."""
    return {name: op.attributes[name] for name in op.attributes}
