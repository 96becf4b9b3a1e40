"""The row emitter (XLA:GPU's reduction emitter, row case, and its softmax-style row
fusion): a kernel whose loop nests all work row by row becomes **one launch** with a group of
`threads_per_row` threads per row (`rows_per_block` rows per block), each loop nest a phase
of it, phases separated by a barrier.

A kernel qualifies when it has a reduction and every `linalg.generic` of it (after
bufferization, parallel dimensions first) iterates the same leading *row* dimensions (the
reductions' kept dimensions) and then either only parallel dimensions (elementwise over
the row: the producers and consumers fused around the reduction, e.g. softmax's
`exp(x - max)` and divide) or only reduction dimensions (a reduction of the row), and every
buffer it touches is indexed by the row dimensions first, identically (so row r only ever
touches row r of what is written), or not by them at all and only read (a broadcast
operand). Then the rows are independent and one group of threads can do all phases of a
row, which is what merges XLA's max-reduce, exp, sum-reduce and divide into one kernel.

A phase of the row:
- **elementwise**: each thread walks the row's elements from its lane, `threads_per_row`
  apart (consecutive lanes read consecutive elements: coalesced);
- **reduction**: each thread folds its strided slice of the row (its first element with no
  initial value: `threads_per_row` is at most the row's length, so every lane has one),
  then the group combines its partial values: a butterfly over the warp
  (`gpu.shuffle xor`, `shfl.sync.bfly`), and for groups wider than a warp each warp's value
  through workgroup memory, a barrier, and a second butterfly over the warps' values. Every
  lane ends with the row's total; lane 0 combines it with the initial value the output
  holds (the kernel's fill wrote it in an earlier phase) and stores it.

The combiner must be one associative, commutative op (add, mul, max, min, and, or, xor) that
reads the accumulator once, or, for a variadic reduce (argmax: a value and its position,
XLA's row reduction emitter takes them too), the ops of the body that read the accumulators,
each accumulator folding in one element value of its own type (`Combination`): lanes then
exchange every accumulator in each round of the butterfly, and the reducer's ops combine
them, which StableHLO requires to be associative and commutative as XLA does. A reduction
of non-minor dimensions goes to the column emitter (`column_emitter.py`); other kernels
(complex values, a variadic reduce whose accumulators share a type) keep the loop emitter,
and the reason is logged.
"""

from dataclasses import dataclass
from math import prod

from mlirxla.backends.cpu.kernel_scratch import element_bytes
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import arith, ir, memref, scf

from .autotune import RowTiling
from .thread_program import WARP, ThreadProgram, index_constant, shuffles_supported

COMBINERS = {"arith.addf", "arith.addi", "arith.mulf", "arith.muli", "arith.maximumf", "arith.minimumf", "arith.maxnumf",
             "arith.minnumf", "arith.maxsi", "arith.minsi", "arith.maxui", "arith.minui", "arith.andi", "arith.ori",
             "arith.xori"}


@dataclass(frozen=True)
class Combination:
    """A reduction's step, as the ops of its body that read its accumulators (the outputs'
    block arguments), in body order: each accumulator folds in one element value, which the
    rest of the body computes, into the value the body yields for it."""

    accumulators: list[ir.Value]
    elements: list[ir.Value]
    ops: list[ir.Operation]
    results: list[ir.Value]

    def combine(self, lefts: list[ir.Value], rights: list[ir.Value]) -> list[ir.Value]:
        """The step on two sets of accumulator values, at the insertion point."""
        mapping = dict(zip(self.accumulators, lefts)) | dict(zip(self.elements, rights))
        for op in self.ops:
            clone = op.clone()
            remap(clone, mapping)
            mapping.update(zip(op.results, clone.results))
        return [mapping[result] for result in self.results]


@dataclass
class Phase:
    """One loop nest of a row or column kernel: its loops inside the rows (or kept columns)."""

    generic: ir.Operation
    inner_sizes: list[int]
    combiner: Combination | None  # a reduction's; None for an elementwise phase

    @property
    def length(self) -> int:
        return prod(self.inner_sizes)


@dataclass
class RowPlan:
    """A kernel as row phases: the row dimensions' sizes and the phases in program order."""

    row_sizes: list[int]
    phases: list[Phase]

    @property
    def rows(self) -> int:
        return prod(self.row_sizes)

    @property
    def shortest_reduction(self) -> int:
        return min(p.length for p in self.phases if p.combiner is not None)


def reads_along_rows(plan: RowPlan) -> bool:
    """Whether the reductions read more bytes with a row dimension minor than with a reduced
    one: a gather of table rows summed over a bag reads `table[id(b, k), j]`, row (b, j)
    varying fastest in j, which lanes along the rows read coalesced (the column emitter's
    mapping) and lanes along the bag read 4 bytes a row. By operand sizes, through the
    operands' indexing maps and the loads in the bodies whose last index is a loop index."""
    row_count = len(plan.row_sizes)
    along_rows = along_reduction = 0
    for phase in plan.phases:
        if phase.combiner is None:
            continue
        generic = phase.generic
        accesses = [(operand, expression_dimension(affine_map.results[-1]))
                    for operand, affine_map in list(zip(generic.operands, indexing_maps(generic)))[:input_count(generic)]
                    if isinstance(operand.type, ir.MemRefType) and affine_map.results]
        accesses += [(load.operands[0], index_dimension(list(load.operands)[-1]))
                     for load in ops_named(generic, "memref.load") if len(list(load.operands)) > 1]
        for operand, dimension in accesses:
            if dimension is None:
                continue
            size = prod(ir.MemRefType(operand.type).shape) * element_bytes(ir.MemRefType(operand.type).element_type)
            if dimension < row_count:
                along_rows += size
            else:
                along_reduction += size
    return along_rows > along_reduction


def expression_dimension(expression) -> int | None:
    return expression.position if isinstance(expression, ir.AffineDimExpr) else None


def index_dimension(index: ir.Value) -> int | None:
    """The loop dimension a load's index is, when it is a `linalg.index`."""
    owner = index.owner
    if isinstance(owner, ir.OpView) and owner.operation.name == "linalg.index":
        return ir.IntegerAttr(owner.operation.attributes["dim"]).value
    return None


class NotRows(Exception):
    """Why a kernel with a reduction keeps the loop emitter."""


def loop_nests(function: ir.Operation, skippable: set[str]) -> tuple[list[ir.Operation], str | None]:
    """The function's top-level `linalg.generic`s in order, up to the first other op not in
    `skippable`, and that op's name (None when there is none)."""
    generics = []
    for op in function.regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "linalg.generic":
            generics.append(op)
        elif op.name not in skippable:
            return generics, op.name
    return generics, None


def plan_rows(function: ir.Operation, skippable: set[str]) -> RowPlan | None:
    """The function's loop nests as row phases; None when it has no reduction; `NotRows`
    when it has one but does not qualify."""
    generics, other = loop_nests(function, skippable)
    if other is not None:
        if any(is_reduction(g) for g in generics):
            raise NotRows(f"a top-level {other} between its loop nests")
        return None
    reductions = [g for g in generics if is_reduction(g)]
    if not reductions:
        return None
    kept = [parallel_count(g) for g in reductions]
    if len(set(kept)) != 1:
        raise NotRows("reductions keeping different numbers of dimensions")
    row_count = kept[0]
    row_sizes = loop_sizes(reductions[0])[:row_count]
    written = {root(v) for g in generics for v in outputs(g)}
    phases = []
    for generic in generics:
        sizes = loop_sizes(generic)
        kinds = iterator_kinds(generic)
        if sizes[:row_count] != row_sizes or not all(kinds[:row_count]):
            raise NotRows(f"a loop nest over {sizes} is not over the rows {row_sizes}")
        inner = kinds[row_count:]
        if any(inner) and not all(inner):
            raise NotRows("a loop nest with both parallel and reduction dimensions inside the row")
        check_row_local(generic, row_count, written)
        combiner = None if all(inner) else reduction_combiner(generic)
        phases.append(Phase(generic, sizes[row_count:], combiner))
    check_views(generics)
    return RowPlan(row_sizes, phases)


def is_reduction(generic: ir.Operation) -> bool:
    return not all(iterator_kinds(generic))


def iterator_kinds(generic: ir.Operation) -> list[bool]:
    """True for each parallel dimension."""
    return ["parallel" in str(attr) for attr in ir.ArrayAttr(generic.attributes["iterator_types"])]


def parallel_count(generic: ir.Operation) -> int:
    kinds = iterator_kinds(generic)
    count = 0
    while count < len(kinds) and kinds[count]:
        count += 1
    if not all(not k for k in kinds[count:]):
        raise NotRows("a reduction whose kept dimensions do not come first")
    return count


def indexing_maps(generic: ir.Operation) -> list[ir.AffineMap]:
    return [ir.AffineMapAttr(attr).value for attr in ir.ArrayAttr(generic.attributes["indexing_maps"])]


def input_count(generic: ir.Operation) -> int:
    return list(ir.DenseI32ArrayAttr(generic.attributes["operandSegmentSizes"]))[0]


def outputs(generic: ir.Operation) -> list[ir.Value]:
    return list(generic.operands)[input_count(generic):]


def loop_sizes(generic: ir.Operation) -> list[int]:
    """Each loop's trip count, from the static shapes of the operands its map names it in."""
    maps = indexing_maps(generic)
    sizes: list[int | None] = [None] * maps[0].n_dims
    for operand, affine_map in zip(generic.operands, maps):
        if not isinstance(operand.type, ir.MemRefType):
            continue
        for position, expression in enumerate(affine_map.results):
            if isinstance(expression, ir.AffineDimExpr):
                sizes[expression.position] = operand.type.shape[position]
    if any(s is None or s < 0 for s in sizes):
        raise NotRows("a loop whose trip count no operand's static shape gives")
    return sizes


def dims_used(expression) -> set[int]:
    if isinstance(expression, ir.AffineDimExpr):
        return {expression.position}
    if isinstance(expression, ir.AffineBinaryExpr):
        return dims_used(expression.lhs) | dims_used(expression.rhs)
    return set()


def root(value: ir.Value) -> ir.Value:
    """The function argument (or allocation) a view is of."""
    while isinstance(value.owner, ir.OpView) and value.owner.operation.name.startswith("memref.") \
            and value.owner.operation.name not in ("memref.alloc", "memref.alloca", "memref.get_global"):
        value = value.owner.operation.operands[0]
    return value


def check_row_local(generic: ir.Operation, row_count: int, written: set) -> None:
    rows = list(range(row_count))
    for number, (operand, affine_map) in enumerate(zip(generic.operands, indexing_maps(generic))):
        if not isinstance(operand.type, ir.MemRefType):
            continue
        results = list(affine_map.results)
        leading = [e.position if isinstance(e, ir.AffineDimExpr) else None for e in results[:row_count]]
        later = set().union(*(dims_used(e) for e in results[row_count:])) if results[row_count:] else set()
        if leading == rows and not later & set(rows):
            continue
        if root(operand) not in written and len(set().union(*(dims_used(e) for e in results))) < affine_map.n_dims:
            continue  # a broadcast of what the kernel does not write (a mask's lengths): small, read from cache
        raise NotRows(f"operand {number} of a loop nest is not indexed by the rows first")


def check_views(generics: list[ir.Operation]) -> None:
    """A written buffer seen through views of different shapes could put one row's elements
    in another's: every operand over a written buffer is one contiguous view, up to unit
    dimensions (a layer norm's statistic read as [N] and as [N, 1]: the same element per
    row)."""
    views: dict = {}
    written = {root(v) for g in generics for v in outputs(g)}
    for generic in generics:
        for operand in generic.operands:
            if isinstance(operand.type, ir.MemRefType) and root(operand) in written:
                if views.setdefault(root(operand), contiguous_view(operand.type)) != contiguous_view(operand.type):
                    raise NotRows("a written buffer is read through views of different shapes")


def contiguous_view(memref_type: ir.Type) -> tuple:
    """A memref type's shape without its unit dimensions when it is row-major and contiguous
    from offset 0 (then two such views of one buffer with equal shapes address it alike), else
    the whole type."""
    memref = ir.MemRefType(memref_type)
    strides, offset = memref.get_strides_and_offset()
    shape = list(memref.shape)
    expected = [prod(shape[d + 1:]) for d in range(len(shape))]
    if offset != 0 or any(size != 1 and stride != want for size, stride, want in zip(shape, strides, expected)):
        return (str(memref_type),)
    return (str(memref.element_type), *(size for size in shape if size != 1))


def subtractions_as_additions(function: ir.Operation) -> int:
    """A reduction whose body subtracts each element from the accumulator (the sum of a negated
    operand, which elementwise fusion folds into the reduction: a cross-entropy gradient's
    label sum) adds the element's negation instead, the same value to the bit (a - b is a +
    (-b) in IEEE arithmetic and in two's complement), so that its combiner is an associative
    add the emitters can split over threads. How many were rewritten."""
    rewritten = 0
    for generic in ops_named(function, "linalg.generic"):
        if all(iterator_kinds(generic)) or len(outputs(generic)) != 1:
            continue
        body = generic.regions[0].blocks[0]
        accumulator = body.arguments[input_count(generic)]
        yielded = list(body.operations)[-1].operands[0]
        subtraction = yielded.owner.operation if isinstance(yielded.owner, ir.OpView) else None
        if subtraction is None or subtraction.name not in ("arith.subf", "arith.subi") or subtraction.operands[0] != accumulator:
            continue
        element = subtraction.operands[1]
        with ir.InsertionPoint(subtraction), subtraction.location:
            if subtraction.name == "arith.subf":
                total = arith.AddFOp(accumulator, arith.NegFOp(element).result).result
            else:
                zero = arith.ConstantOp(element.type, 0).result
                total = arith.AddIOp(accumulator, arith.SubIOp(zero, element).result).result
        subtraction.results[0].replace_all_uses_with(total)
        subtraction.erase()
        rewritten += 1
    return rewritten


def reduction_combiner(generic: ir.Operation) -> Combination:
    """The reduction's step; `NotRows` when lanes cannot split it."""
    body = generic.regions[0].blocks[0]
    accumulators = list(body.arguments)[input_count(generic):]
    for accumulator in accumulators:
        if not shuffles_supported(accumulator.type):
            raise NotRows(f"a reduction of {accumulator.type}")
    terminator = list(body.operations)[-1]
    if len(accumulators) == 1:
        return single_combiner(body, accumulators[0], terminator.operands[0])
    return variadic_combination(body, accumulators, list(terminator.operands))


def single_combiner(body: ir.Block, accumulator: ir.Value, yielded_value: ir.Value) -> Combination:
    combiner = yielded_value.owner.operation if isinstance(yielded_value.owner, ir.OpView) else None
    uses = sum(1 for op in body.operations for operand in op.operation.operands if operand == accumulator)
    if combiner is None or combiner.name not in COMBINERS or uses != 1 or accumulator not in list(combiner.operands):
        raise NotRows("a reduction whose combiner is not one associative op on the accumulator")
    element = [v for v in combiner.operands if v != accumulator][0]
    return Combination([accumulator], [element], [combiner], [combiner.results[0]])


def variadic_combination(body: ir.Block, accumulators: list[ir.Value], yielded_values: list[ir.Value]) -> Combination:
    """The ops reading the accumulators (directly or through each other) and, matched by type,
    the element each folds in: the values those ops read that the body computes without
    them (constants aside)."""
    reading, ops = set(accumulators), []
    for op in list(body.operations)[:-1]:
        op = op.operation
        if any(operand in reading for operand in op.operands):
            if len(op.regions):
                raise NotRows("a variadic reduction whose step holds a region")
            ops.append(op)
            reading.update(op.results)
    read = []
    for op in ops:
        for operand in op.operands:
            producer = operand.owner
            constant = isinstance(producer, ir.OpView) and producer.operation.name == "arith.constant"
            if operand not in reading and not constant and operand not in read:
                read.append(operand)
    types = [str(a.type) for a in accumulators]
    if len(set(types)) != len(types) or sorted(str(v.type) for v in read) != sorted(types):
        raise NotRows("a variadic reduction whose elements cannot be told apart by type")
    computed = set(body.arguments) | {result for op in body.operations for result in op.operation.results}
    if any(value not in computed for value in read):
        raise NotRows("a variadic reduction whose step reads a value from outside its body")
    if any(value not in reading or value in accumulators for value in yielded_values):
        raise NotRows("a variadic reduction that yields a value its step does not compute")
    elements = [next(v for v in read if str(v.type) == kind) for kind in types]
    return Combination(accumulators, elements, ops, yielded_values)


# --- emission ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class RowLaunch:
    grid: int
    block: int
    program: ThreadProgram


def emit(function: ir.Operation, plan: RowPlan, tiling: RowTiling, host: bool, module_body: ir.Block, name: str) -> RowLaunch:
    """The plan as one launch before the function's terminator; the generics are erased."""
    rows_per_block = tiling.rows_per_block
    grid = -(-plan.rows // rows_per_block)
    terminator = list(function.regions[0].blocks[0].operations)[-1]
    with ir.InsertionPoint(terminator):
        program = ThreadProgram(grid, tiling.block, host, module_body, name)
        for number, phase in enumerate(plan.phases):
            if number:
                program.barrier()
            if phase.combiner is None:
                emit_elementwise(program, plan, phase, tiling)
            else:
                emit_reduction(program, plan, phase, tiling)
    for phase in plan.phases:
        phase.generic.erase()
    return RowLaunch(grid, tiling.block, program)


def coordinates(program: ThreadProgram, tiling: RowTiling) -> tuple[ir.Value, ir.Value]:
    """This thread's row and its lane in the row's group."""
    thread = program.thread
    group = index_constant(tiling.threads_per_row)
    row = arith.AddIOp(arith.MulIOp(program.block_index, index_constant(tiling.rows_per_block)).result,
                       arith.DivUIOp(thread, group).result).result
    return row, arith.RemUIOp(thread, group).result


def delinearize(linear: ir.Value, sizes: list[int]) -> list[ir.Value]:
    indices = []
    for d in reversed(range(len(sizes))):
        size = index_constant(sizes[d])
        indices.append(arith.RemUIOp(linear, size).result if d else linear)
        if d:
            linear = arith.DivUIOp(linear, size).result
    return list(reversed(indices))


def map_indices(affine_map: ir.AffineMap, dims: list[ir.Value]) -> list[ir.Value]:
    values = []
    for expression in affine_map.results:
        if isinstance(expression, ir.AffineDimExpr):
            values.append(dims[expression.position])
        elif isinstance(expression, ir.AffineConstantExpr):
            values.append(index_constant(expression.value))
        else:
            single = ir.AffineMap.get(affine_map.n_dims, affine_map.n_symbols, [expression])
            apply = ir.Operation.create("affine.apply", results=[ir.IndexType.get()], operands=dims,
                                        attributes={"map": ir.AffineMapAttr.get(single)})
            values.append(apply.results[0])
    return values


def body_values(generic: ir.Operation, dims: list[ir.Value], skip: Combination | None = None, given: dict | None = None) -> dict:
    """Clone the generic's body at the insertion point, its block arguments the operands'
    elements at `dims` (outputs' only when the body reads them; operand number -> value in
    `given` instead); without `skip`'s ops and the accumulators they read (a reduction's
    elements only); returns the value map."""
    body = generic.regions[0].blocks[0]
    skipped = [] if skip is None else skip.ops
    mapping = {}
    for number, (argument, operand, affine_map) in enumerate(zip(body.arguments, generic.operands, indexing_maps(generic))):
        if given and number in given:
            mapping[argument] = given[number]
            continue
        if not list(argument.uses) or (skip is not None and argument in skip.accumulators):
            continue
        if isinstance(operand.type, ir.MemRefType):
            mapping[argument] = memref.LoadOp(operand, map_indices(affine_map, dims)).result
        else:
            mapping[argument] = operand
    for op in list(body.operations)[:-1]:
        op = op.operation
        if op in skipped:
            continue
        if op.name == "linalg.index":
            mapping[op.results[0]] = dims[ir.IntegerAttr(op.attributes["dim"]).value]
            continue
        clone = op.clone()
        remap(clone, mapping)
        mapping.update(zip(op.results, clone.results))
    return mapping


def remap(op: ir.Operation, mapping: dict) -> None:
    for index, operand in enumerate(op.operands):
        if operand in mapping:
            op.operands[index] = mapping[operand]
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                remap(inner.operation, mapping)


def yielded(generic: ir.Operation, mapping: dict) -> list[ir.Value]:
    terminator = list(generic.regions[0].blocks[0].operations)[-1]
    return [mapping.get(v, v) for v in terminator.operands]


def guarded(condition: ir.Value | None):
    """A `then` block to build in (or the current point when there is no condition)."""
    if condition is None:
        return None
    branch = scf.IfOp(condition)
    with ir.InsertionPoint(branch.then_block):
        scf.YieldOp([])
    return ir.InsertionPoint.at_block_terminator(branch.then_block)


def row_inside(plan: RowPlan, tiling: RowTiling, row: ir.Value) -> ir.Value | None:
    if plan.rows % tiling.rows_per_block == 0:
        return None
    return arith.CmpIOp(arith.CmpIPredicate.ult, row, index_constant(plan.rows)).result


def emit_elementwise(program: ThreadProgram, plan: RowPlan, phase: Phase, tiling: RowTiling) -> None:
    with program.at():
        row, lane = coordinates(program, tiling)
        inside = guarded(row_inside(plan, tiling, row))
        with inside or program.at():
            loop = scf.ForOp(lane, index_constant(phase.length), index_constant(tiling.threads_per_row))
            with ir.InsertionPoint(loop.body):
                dims = delinearize(row, plan.row_sizes) + delinearize(loop.induction_variable, phase.inner_sizes)
                mapping = body_values(phase.generic, dims)
                for value, operand, affine_map in zip(yielded(phase.generic, mapping), outputs(phase.generic),
                                                      indexing_maps(phase.generic)[input_count(phase.generic):]):
                    memref.StoreOp(value, operand, map_indices(affine_map, dims))
                scf.YieldOp([])


def emit_reduction(program: ThreadProgram, plan: RowPlan, phase: Phase, tiling: RowTiling) -> None:
    generic, combination = phase.generic, phase.combiner
    group = tiling.threads_per_row

    def elements(row_dims, position):
        mapping = body_values(generic, row_dims + delinearize(position, phase.inner_sizes), skip=combination)
        return [mapping.get(element, element) for element in combination.elements]

    with program.at():
        row, lane = coordinates(program, tiling)
        if row_inside(plan, tiling, row) is not None:  # threads past the last row read the last row, store nothing
            row = arith.MinUIOp(row, index_constant(plan.rows - 1)).result
        row_dims = delinearize(row, plan.row_sizes)
        firsts = elements(row_dims, lane)
        loop = scf.ForOp(arith.AddIOp(lane, index_constant(group)).result, index_constant(phase.length),
                         index_constant(group), firsts)
        with ir.InsertionPoint(loop.body):
            scf.YieldOp(combination.combine(list(loop.inner_iter_args), elements(row_dims, loop.induction_variable)))
        values = list(loop.results)
    values = butterfly(program, combination, values, min(group, WARP))
    if group > WARP:
        warps = group // WARP
        shared = [program.shared(tiling.rows_per_block * warps, value.type) for value in values]
        with program.at():
            thread = program.thread
            first_lane = arith.CmpIOp(arith.CmpIPredicate.eq, arith.RemUIOp(thread, index_constant(WARP)).result,
                                      index_constant(0)).result
            with guarded(first_lane):
                for value, array in zip(values, shared):
                    memref.StoreOp(value, array(), [arith.DivUIOp(thread, index_constant(WARP)).result])
        program.barrier()
        with program.at():
            thread = program.thread
            slot = arith.AddIOp(arith.MulIOp(arith.DivUIOp(thread, index_constant(group)).result, index_constant(warps)).result,
                                arith.RemUIOp(thread, index_constant(warps)).result).result
            values = [memref.LoadOp(array(), [slot]).result for array in shared]
        values = butterfly(program, combination, values, warps)
    with program.at():
        row, lane = coordinates(program, tiling)
        store = arith.CmpIOp(arith.CmpIPredicate.eq, lane, index_constant(0)).result
        if (inside := row_inside(plan, tiling, row)) is not None:
            store = arith.AndIOp(store, inside).result
        with guarded(store):
            indices = [map_indices(affine_map, delinearize(row, plan.row_sizes))
                       for affine_map in indexing_maps(generic)[input_count(generic):]]
            initials = [memref.LoadOp(output, at).result for output, at in zip(outputs(generic), indices)]
            for total, output, at in zip(combination.combine(initials, values), outputs(generic), indices):
                memref.StoreOp(total, output, at)


def butterfly(program: ThreadProgram, combination: Combination, values: list[ir.Value], width: int) -> list[ir.Value]:
    """Every lane of each aligned group of `width` lanes ends with the group's combination."""
    offset = width // 2
    while offset:
        owns, others = program.exchange_xor(values, offset)
        with program.at():
            values = combination.combine(owns, others)
        offset //= 2
    return values
