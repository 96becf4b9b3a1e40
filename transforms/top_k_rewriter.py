"""xhlo-top-k-rewriter: a sort of (x, positions) by x, whose results only slices of the first k
positions read, becomes one `TopK` custom call (XLA's TopkRewriter; XLA:CPU then
runs TopK in its runtime library).

`lax.top_k` arrives as `chlo.top_k`, which the front door decomposes as XLA does: an iota of
positions along the last dimension, a stable sort of (x, positions) by x descending, and two
slices of the first k positions. Compiled as written that is four kernels and three buffers
of the operand's full size: the iota writes every position of every row, the sort's selection
kernel reads them back and writes rows of full length of which it fills k, and the slices copy
those k out. The custom call is one kernel on the CPU (`backends/cpu/top_k_kernel.py`): it
counts positions itself and writes the k-wide results directly, and it is one kernel to
compile instead of four.

Matched: a sort along the last dimension of two operands, the second an iota along that
dimension (the positions), whose comparator orders by the first operand alone, descending
(the k largest) or ascending (the k smallest) (`sort_comparator.comparator_keys`; stable or not: the call keeps the stable order, earlier
positions first among equal keys, which an unstable sort may also give); every use of either
result a unit-stride slice of the first k positions along the dimension and all of the others,
with one k for all, at most `MAX_K` (the selection kernel inserts into a k-entry buffer, so a
large k is no longer cheap; a larger one stays a sort). Complex keys stay sorts.

The call: `xhlo.custom_call(x) {call_target_name = "TopK", largest, canonical}` -> (values,
positions), both `[..., k]`, the positions in the iota's element type; `largest` is XLA's
TopK attribute (descending), `canonical` the comparator's equality (-0.0 as +0.0, every NaN as one, which is then the largest; else IEEE total order).
Every rewrite is listed in `top-k-rewriter.txt`. Changed: any sort rewritten.
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.ir_queries import defining_op, ops_named
from mlirxla.mlir import ir

from .erasure import erase
from .fusion_legality import kind_of
from .pass_base import ModulePass, PassResult, TextReport
from .priority_fusion import describe
from .sort_comparator import SortKey, comparator_keys

TARGET = "TopK"
MAX_K = 64


@dataclass(frozen=True)
class TopKSort:
    """A sort the rewriter replaces: its key, k, and the slices reading its results (by result)."""

    sort: ir.Operation
    key: SortKey
    k: int
    slices: tuple[tuple[int, ir.Operation], ...]


def is_positions(value: ir.Value, dimension: int) -> bool:
    """Whether `value` is an integer iota counting along `dimension`."""
    op = defining_op(value)
    return (op is not None and op.name == "xhlo.iota"
            and ir.IntegerAttr(op.attributes["iota_dimension"]).value == dimension
            and isinstance(ir.RankedTensorType(value.type).element_type, ir.IntegerType))


def leading_slice_limit(slice_op: ir.Operation, shape: list[int]) -> int | None:
    """k when `slice_op` reads positions [0, k) of the last dimension and all of the others."""
    starts = list(ir.DenseI64ArrayAttr(slice_op.attributes["start_indices"]))
    limits = list(ir.DenseI64ArrayAttr(slice_op.attributes["limit_indices"]))
    strides = list(ir.DenseI64ArrayAttr(slice_op.attributes["strides"]))
    if any(starts) or any(stride != 1 for stride in strides) or limits[:-1] != shape[:-1]:
        return None
    return limits[-1]


def matched(sort: ir.Operation) -> TopKSort | None:
    shape = list(ir.RankedTensorType(sort.operands[0].type).shape)
    dimension = ir.IntegerAttr(sort.attributes["dimension"]).value
    if len(sort.operands) != 2 or dimension != len(shape) - 1 or not is_positions(sort.operands[1], dimension):
        return None
    if isinstance(ir.RankedTensorType(sort.operands[0].type).element_type, ir.ComplexType):
        return None
    keys = comparator_keys(sort)
    if keys is None or len(keys) != 1 or keys[0].operand != 0 or keys[0].part != "value":
        return None
    slices, limits = [], set()
    for index, result in enumerate(sort.results):
        for use in result.uses:
            user = use.owner.operation
            if kind_of(user) != "slice" or (limit := leading_slice_limit(user, shape)) is None:
                return None
            slices.append((index, user))
            limits.add(limit)
    if len(limits) != 1 or not 0 < (k := limits.pop()) <= MAX_K:
        return None
    return TopKSort(sort, keys[0], k, tuple(slices))


def rewrite(found: TopKSort) -> None:
    """Replace the sort and its slices by the call; the iota goes when nothing else reads it."""
    sort = found.sort
    rows = list(ir.RankedTensorType(sort.operands[0].type).shape)[:-1]
    result_types = [ir.RankedTensorType.get(rows + [found.k], ir.RankedTensorType(v.type).element_type) for v in sort.operands]
    with ir.InsertionPoint(sort):
        call = create_op("xhlo.custom_call", [sort.operands[0]], result_types,
                         {"call_target_name": ir.StringAttr.get(TARGET), "largest": ir.BoolAttr.get(found.key.descending),
                          "canonical": ir.BoolAttr.get(found.key.canonical)},
                         sort.location)
    for index, slice_op in found.slices:
        slice_op.results[0].replace_all_uses_with(call.results[index])
        erase(slice_op)
    positions = defining_op(sort.operands[1])
    erase(sort)
    if not list(positions.results[0].uses):
        erase(positions)


@dataclass(frozen=True)
class TopKRewriterPass(ModulePass):
    """Rewrites top-k sorts (and their slices) as TopK custom calls."""

    name: ClassVar[str] = "xhlo-top-k-rewriter"
    summary: ClassVar[str] = "a sort of (x, iota) read only in its first k positions as one TopK custom call"

    def run(self, module: ir.Module) -> PassResult:
        lines = []
        for sort in ops_named(module, "xhlo.sort"):
            if (found := matched(sort)) is not None:
                lines.append(f"{describe(sort)}: TopK custom call, k = {found.k}, {'largest' if found.key.descending else 'smallest'}")
                rewrite(found)
        return PassResult(bool(lines), TextReport({"top-k-rewriter.txt": "\n".join(lines) + "\n"} if lines else {}))
