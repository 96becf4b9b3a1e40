"""The transpose emitter (XLA:GPU's transpose emitter): an elementwise kernel that reads an
operand across its minor dimension (the output's minor dimension is another of the
operand's: `transpose` of the minor dimensions, with whatever elementwise work is fused
around it) goes through shared memory, 32 x 32 elements per block.

The loop emitter's one thread per output element writes the output along its minor
dimension but reads such an operand 4 bytes per row it touches: one memory transaction per
element. Here each block owns a 32 x 32 tile of the two dimensions involved (the output's
minor dimension b and the dimension a that is the operand's minor one; the other dimensions
are the grid's too): first its threads read the operand's tile along a (lanes along the
operand's minor dimension: coalesced) into a shared tile of 32 x 33 (the padding column puts
a tile column's elements in distinct banks, for the transposed read), a barrier, then they
compute the fused body along b (lanes along the output's minor dimension: coalesced writes),
the operand's value read from the tile transposed. `rows_per_pass` threads per tile column
(`TransposeTiling`) each handle every `rows_per_pass`-th tile row.

Taken: one `linalg.generic`, all parallel, one output written in order (identity map), and
operands read through a permutation of the loop dimensions whose last is not the output's
last; those with the same minor dimension go through tiles, the others are read directly.
"""

from dataclasses import dataclass
from math import prod

from mlirxla.mlir import arith, ir, memref, scf

from .autotune import TransposeTiling
from .row_emitter import (NotRows, body_values, delinearize, guarded, indexing_maps, input_count, iterator_kinds, loop_nests,
                          loop_sizes, map_indices, outputs, root, yielded)
from .thread_program import WARP, ThreadProgram, index_constant

TILE = WARP
PADDED = TILE + 1


@dataclass
class TransposePlan:
    generic: ir.Operation
    sizes: list[int]
    minor: int  # the loop dimension the tiled operands have as their minor one
    tiled: list[int]  # operand numbers read through tiles

    @property
    def batch(self) -> list[int]:
        """The loop dimensions the grid covers besides the tile's two."""
        return [d for d in range(len(self.sizes)) if d not in (self.minor, len(self.sizes) - 1)]


def plan_transpose(function: ir.Operation, skippable: set[str]) -> TransposePlan | None:
    """The function as a tiled transpose; None when it is not one; `NotRows` when it reads
    across its minor dimension but cannot be tiled."""
    generics, other = loop_nests(function, skippable)
    if other is not None:
        return None
    if len(generics) != 1 or not all(iterator_kinds(generics[0])) or len(outputs(generics[0])) != 1:
        return None
    generic = generics[0]
    maps = indexing_maps(generic)
    rank = maps[0].n_dims
    if rank < 2 or [getattr(e, "position", None) for e in maps[-1].results] != list(range(rank)):
        return None
    transposing = {}
    for number, (operand, affine_map) in enumerate(list(zip(generic.operands, maps))[:input_count(generic)]):
        results = list(affine_map.results)
        if isinstance(operand.type, ir.MemRefType) and results and all(isinstance(e, ir.AffineDimExpr) for e in results) \
                and results[-1].position != rank - 1:
            transposing.setdefault(results[-1].position, []).append(number)
    if not transposing:
        return None
    sizes = loop_sizes(generic)
    minor, tiled = next(iter(transposing.items()))
    if sizes[minor] < 2 or sizes[-1] < 2:
        return None
    output = root(outputs(generic)[0])
    if any(root(generic.operands[number]) == output for number in tiled):
        raise NotRows("a transpose in place")
    return TransposePlan(generic, sizes, minor, tiled)


@dataclass(frozen=True)
class TransposeLaunch:
    grid: int
    block: int
    program: ThreadProgram


def emit(function: ir.Operation, plan: TransposePlan, tiling: TransposeTiling, host: bool, module_body: ir.Block,
         name: str) -> TransposeLaunch:
    tiles_a, tiles_b = -(-plan.sizes[plan.minor] // TILE), -(-plan.sizes[-1] // TILE)
    grid = prod(plan.sizes[d] for d in plan.batch) * tiles_a * tiles_b
    generic = plan.generic
    terminator = list(function.regions[0].blocks[0].operations)[-1]
    with ir.InsertionPoint(terminator):
        program = ThreadProgram(grid, tiling.block, host, module_body, name)
        tiles = {number: program.shared(TILE * PADDED, ir.MemRefType(generic.operands[number].type).element_type)
                 for number in plan.tiled}

        def tile_loop(along_a: bool, body) -> None:
            """Each thread's tile rows (every rows_per_pass-th), its lane the tile column;
            `body(dims, lane, row)` under the bounds guard."""
            with program.at():
                thread = program.thread
                lane, first_row = arith.RemUIOp(thread, index_constant(WARP)).result, arith.DivUIOp(thread, index_constant(WARP)).result
                rest = program.block_index
                tile_b = arith.RemUIOp(rest, index_constant(tiles_b)).result
                rest = arith.DivUIOp(rest, index_constant(tiles_b)).result
                tile_a = arith.RemUIOp(rest, index_constant(tiles_a)).result
                batch = delinearize(arith.DivUIOp(rest, index_constant(tiles_a)).result, [plan.sizes[d] for d in plan.batch])
                loop = scf.ForOp(first_row, index_constant(TILE), index_constant(tiling.rows_per_pass))
                with ir.InsertionPoint(loop.body):
                    row = loop.induction_variable
                    a_offset, b_offset = (lane, row) if along_a else (row, lane)
                    position_a = arith.AddIOp(arith.MulIOp(tile_a, index_constant(TILE)).result, a_offset).result
                    position_b = arith.AddIOp(arith.MulIOp(tile_b, index_constant(TILE)).result, b_offset).result
                    dims = [None] * len(plan.sizes)
                    dims[plan.minor], dims[-1] = position_a, position_b
                    for d, value in zip(plan.batch, batch):
                        dims[d] = value
                    inside = arith.AndIOp(
                        arith.CmpIOp(arith.CmpIPredicate.ult, position_a, index_constant(plan.sizes[plan.minor])).result,
                        arith.CmpIOp(arith.CmpIPredicate.ult, position_b, index_constant(plan.sizes[-1])).result).result
                    with guarded(inside):
                        body(dims, lane, row)
                    scf.YieldOp([])

        def load_tiles(dims, lane, row):  # lanes along a: the operand's minor dimension
            for number, tile in tiles.items():
                value = memref.LoadOp(generic.operands[number], map_indices(indexing_maps(generic)[number], dims)).result
                memref.StoreOp(value, tile(), [slot(row, lane)])

        def compute(dims, lane, row):  # lanes along b: the output's minor dimension
            given = {number: memref.LoadOp(tile(), [slot(lane, row)]).result for number, tile in tiles.items()}
            mapping = body_values(generic, dims, given=given)
            (value,) = yielded(generic, mapping)
            memref.StoreOp(value, outputs(generic)[0], map_indices(indexing_maps(generic)[-1], dims))

        tile_loop(True, load_tiles)
        program.barrier()
        tile_loop(False, compute)
    generic.erase()
    return TransposeLaunch(grid, tiling.block, program)


def slot(row: ir.Value, column: ir.Value) -> ir.Value:
    """Tile element (row, column): row along b, column along a, rows padded to 33."""
    return arith.AddIOp(arith.MulIOp(row, index_constant(PADDED)).result, column).result
