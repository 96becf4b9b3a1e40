"""The column emitter (XLA:GPU's reduction emitter, column case): a kernel that reduces
non-minor dimensions, keeping the minor one (a sum over a batch, a global average pool's
mean over height and width), becomes one launch in which each block owns 32 consecutive
kept elements (*columns*) and `rows_per_pass` threads per column.

Thread (x, y) of a block (x the lane: the column, y the warp) folds rows y, y + rows_per_pass,
... of its column: the 32 lanes of a warp read 32 consecutive columns of one row, so loads
are coalesced where the kept minor dimension is the input's minor dimension. The partial
values go to a shared tile of rows_per_pass x 33 (the padding column puts a tile column's
elements in distinct banks), a barrier, and then each warp reads the tile transposed: lanes
of an aligned group of `rows_per_pass` lanes hold one column's partial values, which a
butterfly of `gpu.shuffle xor` combines; the group's first lane combines the total with the
initial value the output holds and stores it.

A kernel qualifies when every loop nest is over the same kept dimensions: the reductions
(one associative combiner, or a variadic reduce's step such as an argmax's, as for the row
emitter: each accumulator through a tile of its own) and elementwise loop nests over the kept
elements (the fill of the initial value, a mean's divide), each touching only its column
of what the kernel writes; or an elementwise loop nest over the whole space a later
reduction reads, the **side output** of XLA's multi-output reduction fusion (a ReLU's
gradient beside its bias's gradient, the column sum of it). The thread that reads an
element for the reduction computes the side output there, stores it and folds the value it
computed instead of loading it back: one launch that reads the inputs once, where the loop
emitter made one launch for the elementwise nest and one for the sums, which read it back
(with one thread per column: 4 blocks of a GPU's 132 multiprocessors for 1024 columns).
Such a nest may read only what the kernel does not write, and what it writes only
reductions read, each at the element the nest wrote there (so in the thread, or the
thread's block after a barrier, that wrote it).
"""

import contextlib

from dataclasses import dataclass
from math import prod

from mlirxla.mlir import arith, ir, memref, scf

from .autotune import ColumnTiling
from .row_emitter import (NotRows, Phase, body_values, butterfly, check_views, delinearize, dims_used, guarded,
                          indexing_maps, input_count, is_reduction, iterator_kinds, loop_nests, loop_sizes, map_indices,
                          outputs, parallel_count, reduction_combiner, root, yielded)
from .thread_program import WARP, ThreadProgram, index_constant

PADDED = WARP + 1


@dataclass(frozen=True)
class SideOutput:
    """An elementwise loop nest over a reduction's whole space, computed where the reduction
    reads: its dimension `d` is the reduction's dimension `reduction_dims[d]`."""

    generic: ir.Operation
    reduction_dims: list[int]

    def element_map(self, output: int) -> list[int]:
        """The reduction's dimension indexing each dimension of the output `output` writes."""
        affine_map = indexing_maps(self.generic)[input_count(self.generic) + output]
        return [self.reduction_dims[e.position] for e in affine_map.results]


@dataclass
class ColumnPlan:
    kept_sizes: list[int]
    phases: list[Phase]
    side_outputs: dict[int, list[SideOutput]]  # phase number (a reduction's) -> nests it computes

    @property
    def columns(self) -> int:
        return prod(self.kept_sizes)

    @property
    def shortest_reduction(self) -> int:
        return min(p.length for p in self.phases if p.combiner is not None)


def plan_columns(function: ir.Operation, skippable: set[str]) -> ColumnPlan:
    """The function's loop nests as column phases, or `NotRows` saying why not (called for
    kernels with a reduction the row emitter did not take)."""
    generics, other = loop_nests(function, skippable)
    if other is not None:
        raise NotRows(f"a top-level {other} between its loop nests")
    reductions = [g for g in generics if is_reduction(g)]
    kept_count = parallel_count(reductions[0])
    kept_sizes = loop_sizes(reductions[0])[:kept_count]
    if kept_count == 0:
        raise NotRows("a reduction to a scalar")
    identity = list(range(kept_count))
    written = {root(v) for g in generics for v in outputs(g)}
    phases, side_outputs, pending = [], {}, []
    own_elements: dict = {}  # a side output's buffer -> the reduction dimensions indexing it
    for number, generic in enumerate(generics):
        sizes, maps = loop_sizes(generic), indexing_maps(generic)
        reduction = is_reduction(generic)
        if not reduction and len(sizes) > kept_count:
            side = side_output(generic, generics[number + 1:], written)
            pending.append(side)
            own_elements.update((root(v), side.element_map(k)) for k, v in enumerate(outputs(generic)))
            continue
        if sizes[:kept_count] != kept_sizes or (not reduction and len(sizes) != kept_count) \
                or (reduction and parallel_count(generic) != kept_count) or not all(iterator_kinds(generic)[:kept_count]):
            raise NotRows(f"a loop nest over {sizes} is not over the kept elements {kept_sizes}")
        for operand_number, (operand, affine_map) in enumerate(zip(generic.operands, maps)):
            if not isinstance(operand.type, ir.MemRefType):
                continue
            positions = [e.position if isinstance(e, ir.AffineDimExpr) else None for e in affine_map.results]
            if root(operand) in own_elements and not (reduction and positions == own_elements[root(operand)]):
                raise NotRows(f"operand {operand_number} of a loop nest reads a side output elsewhere than where it is written")
            if root(operand) in written and root(operand) not in own_elements and positions != identity:
                raise NotRows(f"operand {operand_number} of a loop nest reads a written buffer across columns")
            if not reduction and set().union(set(), *(dims_used(e) for e in affine_map.results)) - set(identity):
                raise NotRows(f"operand {operand_number} of a loop nest is indexed by more than the kept dimensions")
        if reduction and pending:
            side_outputs[len(phases)], pending = pending, []
        phases.append(Phase(generic, sizes[kept_count:], reduction_combiner(generic) if reduction else None))
    check_views(generics)
    return ColumnPlan(kept_sizes, phases, side_outputs)


def side_output(generic: ir.Operation, later: list[ir.Operation], written: set) -> SideOutput:
    """`generic` as a side output of the first reduction in `later`, which must read one of
    its results (that read gives the dimensions' correspondence), or `NotRows`."""
    reduction = next((g for g in later if is_reduction(g)), None)
    if reduction is None:
        raise NotRows("an elementwise loop nest over more than the kept elements after the last reduction")
    produced = {root(v): m for v, m in zip(outputs(generic), indexing_maps(generic)[input_count(generic):])}
    if any(not m.is_permutation for m in produced.values()):
        raise NotRows("a side output written other than once per element")
    if any(root(v) in written for v in list(generic.operands)[:input_count(generic)] if isinstance(v.type, ir.MemRefType)):
        raise NotRows("a side output's loop nest reads what the kernel writes")
    for operand, affine_map in zip(reduction.operands, indexing_maps(reduction)):
        written_map = produced.get(root(operand)) if isinstance(operand.type, ir.MemRefType) else None
        if written_map is None or not affine_map.is_permutation:
            continue
        reduction_dims = [0] * written_map.n_dims
        for side_dim, reduction_dim in zip(written_map.results, affine_map.results):
            reduction_dims[side_dim.position] = reduction_dim.position
        if [loop_sizes(reduction)[d] for d in reduction_dims] != loop_sizes(generic):
            break
        return SideOutput(generic, reduction_dims)
    raise NotRows("an elementwise loop nest over more than the kept elements that the next reduction does not read whole")


@dataclass(frozen=True)
class ColumnLaunch:
    grid: int
    block: int
    program: ThreadProgram


def emit(function: ir.Operation, plan: ColumnPlan, tiling: ColumnTiling, host: bool, module_body: ir.Block, name: str) -> ColumnLaunch:
    grid = -(-plan.columns // WARP)
    terminator = list(function.regions[0].blocks[0].operations)[-1]
    with ir.InsertionPoint(terminator):
        program = ThreadProgram(grid, tiling.block, host, module_body, name)
        for number, phase in enumerate(plan.phases):
            if number:
                program.barrier()
            if phase.combiner is None:
                emit_elementwise(program, plan, phase)
            else:
                emit_reduction(program, plan, phase, tiling, plan.side_outputs.get(number, []))
    for phase in plan.phases:
        phase.generic.erase()
    for sides in plan.side_outputs.values():
        for side in sides:
            side.generic.erase()
    return ColumnLaunch(grid, tiling.block, program)


def first_column(program: ThreadProgram) -> ir.Value:
    return arith.MulIOp(program.block_index, index_constant(WARP)).result


def column_inside(plan: ColumnPlan, column: ir.Value) -> ir.Value | None:
    if plan.columns % WARP == 0:
        return None
    return arith.CmpIOp(arith.CmpIPredicate.ult, column, index_constant(plan.columns)).result


def both(first: ir.Value, second: ir.Value | None) -> ir.Value:
    return first if second is None else arith.AndIOp(first, second).result


def emit_elementwise(program: ThreadProgram, plan: ColumnPlan, phase: Phase) -> None:
    """The first warp's lanes, one column each."""
    with program.at():
        thread = program.thread
        column = arith.AddIOp(first_column(program), thread).result
        first_warp = arith.CmpIOp(arith.CmpIPredicate.ult, thread, index_constant(WARP)).result
        with guarded(both(first_warp, column_inside(plan, column))):
            dims = delinearize(column, plan.kept_sizes)
            mapping = body_values(phase.generic, dims)
            for value, operand, affine_map in zip(yielded(phase.generic, mapping), outputs(phase.generic),
                                                  indexing_maps(phase.generic)[input_count(phase.generic):]):
                memref.StoreOp(value, operand, map_indices(affine_map, dims))


def emit_reduction(program: ThreadProgram, plan: ColumnPlan, phase: Phase, tiling: ColumnTiling,
                   sides: list[SideOutput]) -> None:
    generic, combination = phase.generic, phase.combiner
    passes = tiling.rows_per_pass
    inside = None

    def elements(kept_dims, position):
        dims = kept_dims + delinearize(position, phase.inner_sizes)
        computed = store_side_outputs(sides, dims, inside)
        given = {number: computed[root(operand)] for number, operand in enumerate(generic.operands)
                 if isinstance(operand.type, ir.MemRefType) and root(operand) in computed}
        mapping = body_values(generic, dims, skip=combination, given=given)
        return [mapping.get(element, element) for element in combination.elements]

    with program.at():
        thread = program.thread
        lane, warp = arith.RemUIOp(thread, index_constant(WARP)).result, arith.DivUIOp(thread, index_constant(WARP)).result
        column = arith.AddIOp(first_column(program), lane).result
        if plan.columns % WARP:  # lanes past the last column read the last column, store nothing
            inside = column_inside(plan, column)
            column = arith.MinUIOp(column, index_constant(plan.columns - 1)).result
        kept_dims = delinearize(column, plan.kept_sizes)
        loop = scf.ForOp(arith.AddIOp(warp, index_constant(passes)).result, index_constant(phase.length), index_constant(passes),
                         elements(kept_dims, warp))
        with ir.InsertionPoint(loop.body):
            scf.YieldOp(combination.combine(list(loop.inner_iter_args), elements(kept_dims, loop.induction_variable)))
        values = list(loop.results)
    tiles = [program.shared(passes * PADDED, value.type) for value in values]
    with program.at():
        lane = arith.RemUIOp(program.thread, index_constant(WARP)).result
        warp = arith.DivUIOp(program.thread, index_constant(WARP)).result
        for value, tile in zip(values, tiles):
            memref.StoreOp(value, tile(), [arith.AddIOp(arith.MulIOp(warp, index_constant(PADDED)).result, lane).result])
    program.barrier()
    with program.at():
        column, partial = transposed(program.thread, passes)
        slot = arith.AddIOp(arith.MulIOp(partial, index_constant(PADDED)).result, column).result
        values = [memref.LoadOp(tile(), [slot]).result for tile in tiles]
    values = butterfly(program, combination, values, passes)
    with program.at():
        column, partial = transposed(program.thread, passes)
        column = arith.AddIOp(first_column(program), column).result
        store = arith.CmpIOp(arith.CmpIPredicate.eq, partial, index_constant(0)).result
        with guarded(both(store, column_inside(plan, column))):
            indices = [map_indices(affine_map, delinearize(column, plan.kept_sizes))
                       for affine_map in indexing_maps(generic)[input_count(generic):]]
            initials = [memref.LoadOp(output, at).result for output, at in zip(outputs(generic), indices)]
            for total, output, at in zip(combination.combine(initials, values), outputs(generic), indices):
                memref.StoreOp(total, output, at)


def store_side_outputs(sides: list[SideOutput], dims: list[ir.Value], inside: ir.Value | None) -> dict:
    """Each side output's element at the reduction's `dims`, stored (by the lanes of real
    columns: `inside`); returns each written buffer's value there."""
    computed = {}
    for side in sides:
        side_dims = [dims[d] for d in side.reduction_dims]
        values = yielded(side.generic, body_values(side.generic, side_dims))
        written_maps = indexing_maps(side.generic)[input_count(side.generic):]
        with guarded(inside) or contextlib.nullcontext():
            for value, output, affine_map in zip(values, outputs(side.generic), written_maps):
                memref.StoreOp(value, output, map_indices(affine_map, side_dims))
        computed.update((root(output), value) for value, output in zip(values, outputs(side.generic)))
    return computed


def transposed(thread: ir.Value, passes: int) -> tuple[ir.Value, ir.Value]:
    """Which tile column (of the block's 32) and which of its partial values a thread reads
    after the barrier: warp w's lanes cover columns w * 32 / passes onwards, `passes`
    consecutive lanes per column."""
    lane = arith.RemUIOp(thread, index_constant(WARP)).result
    warp = arith.DivUIOp(thread, index_constant(WARP)).result
    column = arith.AddIOp(arith.MulIOp(warp, index_constant(WARP // passes)).result,
                          arith.DivUIOp(lane, index_constant(passes)).result).result
    return column, arith.RemUIOp(lane, index_constant(passes)).result
