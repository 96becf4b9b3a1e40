"""xhlo-tree-reduction-rewriter: a reduction with too few kept elements to fill a GPU, and
many elements to reduce into each, becomes two (XLA:GPU's TreeReductionRewriter), on the
cuda pipeline, before layout assignment and fusion.

The cuda backend's reduction emitters run a block per 32 kept columns (`column_emitter.py`)
or per few rows (`row_emitter.py`), every block reducing whole columns or rows: a batch
norm's statistics, 64 channels summed over 65536 positions, were 2 blocks on a GPU of 132
multiprocessors, each thread looping over 2048 rows. Splitting the reduced extent `k` into
`k1 x k2` makes an inner reduction over `k2` that keeps `k1` times as many elements, and an
outer reduction over `k1` of a result `k2` times smaller than the input. Several reduced
dimensions split between two of them, the inner reduction taking the trailing ones (the
split nearest `sqrt(k)`, if within a factor of `BALANCE` of it): no reshape, so the
elementwise work producing the input fuses into the inner reduction (a reshape merging
dimensions stopped that: the batch norm's centred squares went through 16 MB of scratch);
the batch norm's N x (H, W) split keeps 4096 columns, 128 blocks. Otherwise the reduced
extent is reshaped into `k1 x k2` (the input's order unchanged), `k2` the divisor of `k`
nearest below `sqrt(k)` and above `sqrt(k) / 4` (XLA pads `k` instead when it has none; here
such a reduction stays whole and the report says so). The sum is then reassociated, which
the spec allows (a reduction's order is implementation-defined) and XLA does.

A reduction qualifies when it has one input, its reduced dimensions are consecutive, `k` is
at least `MIN_REDUCED`, its input at least `MIN_INPUT` elements (a cross-entropy's mean over
4096 losses stays one launch) and its emitter would run fewer blocks than the GPU has
multiprocessors: kept columns over 32 for a column reduction, kept rows for a row reduction
(its reduced dimensions are the minor ones). Each split is logged
(`tree-reduction-decisions.txt`). Changed: any reduction split.
"""

import math
from dataclasses import dataclass
from typing import ClassVar

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir

from .cost_model import model_for
from .pass_base import ModulePass, PassResult, TextReport, rendering_reports
from .priority_fusion import describe

MIN_REDUCED = 4096  # fewer elements per kept element are read fast enough by one block
MIN_INPUT = 1 << 20  # a smaller input takes a few blocks microseconds: a second launch costs more
COLUMNS_PER_BLOCK = 32  # the column emitter's
# how far from the square root of the reduced extent a split between dimensions may fall: an
# inner part much shorter leaves the outer reduction almost as long as the one it replaces
BALANCE = 16


@dataclass(frozen=True)
class Split:
    first: int  # the reduced dimensions' position in the input
    count: int  # how many reduced dimensions
    outer: int  # k1
    inner: int  # k2
    boundary: int | None = None  # for several reduced dimensions: how many the outer reduction takes


@dataclass(frozen=True)
class TreeReductionRewriterPass(ModulePass):
    """Splits reductions that leave a GPU idle into two."""

    name: ClassVar[str] = "xhlo-tree-reduction-rewriter"
    summary: ClassVar[str] = "tree reduction: a reduction of few kept elements split into two, so that it fills a GPU"
    backend: str = "cuda"

    def run(self, module: ir.Module) -> PassResult:
        multiprocessors = model_for(self.backend).multiprocessors
        log: list[str] = []
        with module.context:
            for reduce in ops_named(module, "xhlo.reduce"):
                split, reason = planned_split(reduce, multiprocessors)
                if split is not None:
                    log.append(f"split {describe(reduce)}: {reason}")
                    rewrite(reduce, split)
                elif reason:
                    log.append(f"kept {describe(reduce)} whole: {reason}")
        changed = any(line.startswith("split") for line in log)
        if not rendering_reports():
            return PassResult(changed)
        return PassResult(changed, TextReport({"tree-reduction-decisions.txt": "".join(f"{line}\n" for line in log)}))


def planned_split(reduce: ir.Operation, multiprocessors: int) -> tuple[Split | None, str]:
    """The split of `reduce`, or None and why not ('' when it is not worth a line)."""
    if len(reduce.operands) != 2 or len(reduce.results) != 1:
        return None, ""
    shape = list(ir.RankedTensorType(reduce.operands[0].type).shape)
    dimensions = sorted(ir.DenseI64ArrayAttr(reduce.attributes["dimensions"]))
    if not dimensions or dimensions != list(range(dimensions[0], dimensions[-1] + 1)):
        return None, ""
    reduced = math.prod(shape[d] for d in dimensions)
    kept = math.prod(shape) // reduced if reduced else 0
    row = dimensions[-1] == len(shape) - 1
    blocks = kept if row else -(-kept // COLUMNS_PER_BLOCK)
    if reduced < MIN_REDUCED or reduced * kept < MIN_INPUT or blocks >= multiprocessors:
        return None, ""
    sizes = [shape[d] for d in dimensions]
    boundary = boundary_near_root(sizes) if len(sizes) > 1 else None
    if boundary is not None and not math.isqrt(reduced) // BALANCE <= math.prod(sizes[boundary:]) <= math.isqrt(reduced) * BALANCE:
        boundary = None
    inner = math.prod(sizes[boundary:]) if boundary is not None else divisor_near_root(reduced)
    if inner is None:
        return None, f"{reduced} reduced elements a kept element have no divisor between {math.isqrt(reduced) // 4} and {math.isqrt(reduced)}"
    kind = "row" if row else "column"
    return (Split(dimensions[0], len(dimensions), reduced // inner, inner, boundary),
            f"a {kind} reduction of {reduced} elements into each of {kept} ({blocks} block(s) for {multiprocessors} "
            f"multiprocessors) as {reduced // inner} x {inner}: {inner} into each of {kept * (reduced // inner)}, then {reduced // inner}")


def boundary_near_root(sizes: list[int]) -> int:
    """Where to split consecutive reduced dimensions of `sizes` so that the trailing part's
    extent is nearest the square root of the whole's (in ratio)."""
    root = math.sqrt(math.prod(sizes))
    return min(range(1, len(sizes)), key=lambda b: abs(math.log(math.prod(sizes[b:]) / root)))


def divisor_near_root(number: int) -> int | None:
    root = math.isqrt(number)
    return next((d for d in range(root, max(1, root // 4), -1) if number % d == 0), None)


def rewrite(reduce: ir.Operation, split: Split) -> None:
    """A reduce over the `inner` part (of the input, or of it reshaped) then `reduce` over the
    `outer` part, in place of `reduce`."""
    source = ir.RankedTensorType(reduce.operands[0].type)
    shape, element = list(source.shape), source.element_type
    before, after = shape[:split.first], shape[split.first + split.count:]
    with ir.InsertionPoint(reduce), reduce.location:
        if split.boundary is None:
            operand = create_op("xhlo.reshape", [reduce.operands[0]],
                                [ir.RankedTensorType.get(before + [split.outer, split.inner] + after, element)], {}).result
            outer_dimensions, inner_dimensions = [split.first], [split.first + 1]
        else:
            operand = reduce.operands[0]
            outer_dimensions = list(range(split.first, split.first + split.boundary))
            inner_dimensions = list(range(split.first + split.boundary, split.first + split.count))
        inner = reduce.clone(ir.InsertionPoint(reduce))
    outer_sizes = [shape[d] for d in outer_dimensions] if split.boundary is not None else [split.outer]
    inner.operands[0] = operand
    inner.results[0].set_type(ir.RankedTensorType.get(before + outer_sizes + after, element))
    inner.attributes["dimensions"] = ir.DenseI64ArrayAttr.get(inner_dimensions)
    reduce.operands[0] = inner.results[0]
    reduce.attributes["dimensions"] = ir.DenseI64ArrayAttr.get(outer_dimensions)
