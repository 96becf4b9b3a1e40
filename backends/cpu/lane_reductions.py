"""A reduction of several values along a row reduces each row in lanes first.

An argmax (`jnp.argmax`, `jax.random.categorical`: a reduce of the values and their
positions, keeping the larger value and on a tie the smaller position) carries two
accumulators through its row, each step's choice depending on both: LLVM's vectorizer takes
no such recurrence, so the row ran one element at a time, and with it whatever the kernel
computes for each element (a categorical's threefry and Gumbel noise: 49 ns an element).

XLA reduces in any order (a reducer must be associative and commutative, its init an
identity), so a reduce of several inputs along their last dimension, K elements long,
becomes two: the rows seen as [K / L, L] reduced along the first of those into L
accumulators each, then the lanes reduced. L divides K: 32 where it does (four vectors of
eight 32-bit lanes, LLVM's width for AVX-512 hosts, so that consecutive steps of the widened
loop do not wait on each other), else the divisor of K between 16 and 64 nearest to it, a
multiple of 8 first (GPT-2's vocabulary of 50257 is 29 x 1733); a row with none stays
whole. In the first every lane's step is independent of its neighbours', so the loop along
the lanes (innermost, along contiguous memory: `loop_order.py`) is what the vectorizer
widens, the whole per-element computation with it. Ties keep their answer: each lane keeps
its first extreme, and the lanes' reduction its smallest position, as the row's did.

Runs on a kernel's StableHLO (`kernel_source.finish`), so that fusion, slicing and the
thunks see the reduce they decided about. One-input reductions are left alone: LLVM widens a
sum or a product, `integer_order_reductions.py` a maximum or a minimum.
"""

from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir
from mlirxla.transforms.fusion_graph import clone_into

LANES = 32
FEWEST_LANES, MOST_LANES = 16, 64
# shorter rows gain less than the second reduction costs
MIN_ROW = 4 * LANES


def reduce_rows_in_lanes(module: ir.Module) -> int:
    """Split every reduce of several inputs along long rows of `module` into lanes; how many."""
    split = 0
    for reduce in ops_named(module, "stablehlo.reduce"):
        shape = lane_row_shape(reduce)
        if shape is not None:
            with ir.InsertionPoint(reduce), reduce.location:
                split_into_lanes(reduce, shape)
            split += 1
    return split


def lane_row_shape(reduce: ir.Operation) -> list[int] | None:
    """The inputs' shape when `reduce` reduces several of them along their last dimension
    only, a long one that some lane count divides; else None."""
    count = len(reduce.operands) // 2
    if count < 2:
        return None
    shape = list(ir.RankedTensorType(reduce.operands[0].type).shape)
    if list(ir.DenseI64ArrayAttr(reduce.attributes["dimensions"])) != [len(shape) - 1]:
        return None
    if shape[-1] < MIN_ROW or lane_count(shape[-1]) is None:
        return None
    return shape


def lane_count(row: int) -> int | None:
    """The lanes a row of `row` elements is reduced in: a divisor of it, nearest to `LANES`,
    whole vectors first; None when it has no divisor in range."""
    divisors = [lanes for lanes in range(FEWEST_LANES, MOST_LANES + 1) if row % lanes == 0]
    return min(divisors, key=lambda lanes: (lanes % 8 != 0, abs(lanes - LANES)), default=None)


def split_into_lanes(reduce: ir.Operation, shape: list[int]) -> None:
    count = len(reduce.operands) // 2
    inputs, inits = list(reduce.operands[:count]), list(reduce.operands[count:])
    lanes = lane_count(shape[-1])
    lanes_shape = shape[:-1] + [shape[-1] // lanes, lanes]
    in_lanes = [stablehlo_op("reshape", [value], [typed(value, lanes_shape)]) for value in inputs]
    lane_results = [typed(value, shape[:-1] + [lanes]) for value in inputs]
    by_lane = reduce_like(reduce, in_lanes + inits, lane_results, len(shape) - 1)
    rows = reduce_like(reduce, list(by_lane.results) + inits, [r.type for r in reduce.results], len(shape) - 1)
    for old, new in zip(reduce.results, rows.results):
        old.replace_all_uses_with(new)
    reduce.erase()


def typed(value: ir.Value, shape: list[int]) -> ir.Type:
    return ir.RankedTensorType.get(shape, ir.RankedTensorType(value.type).element_type)


def stablehlo_op(name: str, operands: list[ir.Value], results: list[ir.Type]) -> ir.Value:
    return ir.Operation.create(f"stablehlo.{name}", results=results, operands=operands).result


def reduce_like(reduce: ir.Operation, operands: list[ir.Value], results: list[ir.Type], dimension: int) -> ir.Operation:
    """A reduce with `reduce`'s reducer over `operands` (inputs, then inits) along `dimension`."""
    copy = ir.Operation.create("stablehlo.reduce", results=results, operands=operands,
                               attributes={"dimensions": ir.DenseI64ArrayAttr.get([dimension])}, regions=1)
    source = reduce.regions[0].blocks[0]
    block = copy.regions[0].blocks.append(*[argument.type for argument in source.arguments])
    mapping = dict(zip(source.arguments, block.arguments))
    with ir.InsertionPoint(block):
        for op in source.operations:
            clone_into(op.operation, mapping)
    return copy
