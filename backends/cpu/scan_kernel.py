"""A reduce_window that is a cumulative reduction (jax's cumsum, cumprod, cummax, cummin) as a
generated loop kernel: one pass along the scanned dimension, each element combined into the
one before it.

jax lowers `cumsum(x, axis)` to a reduce_window whose window spans the whole axis, padded by
its length less one on the low side (on the high side for `reverse=True`): as loops over
every window that is n * n / 2 combinations per row, 228 ms for a 256x4096 cumsum that
XLA:CPU runs in 3.5 ms (its ReduceWindowRewriter turns the window into a two-level tree of
128-wide scans). A scan needs about 2n: each block of 128 along the axis scanned on its own
(result[i] = result[i - 1] + x[i], the first block starting from init + x[0]; from the last
element for a reverse scan), then every element of a block combined with the final last
element of the block before. The rounding is then that of XLA's two levels: a sequential
sum of 4096 f32 terms erred 15 times as much as XLA's against float64.

The loops run over the dimensions before the scanned one, then along it, then over the
dimensions after it, innermost: there each step combines whole rows of the previous result,
which vectorize. One input, a reducer that is one combiner of both arguments (add, multiply,
maximum, minimum, or, and; complex add and multiply with the init 0 or 1) or, for f32, f64 and integer elements, any computation the kernel
text can inline (`scalar_regions.py`: jax's cumlogsumexp reduces by log-add-exp, 7.3 s for a
256x4096 one as window loops), one window dimension spanning its axis with stride 1 and no
dilation, the others trivial, and an init value the padding cannot show through: the spec
pads with the init value, so each window combines it once per padded position, which a scan
does not; with the combiner's identity (any zero for an add) that changes nothing. A
computation's identity is found by evaluating it on the init value and probe values of every
kind (zeros, infinities, NaN, extremes). The scan reassociates the reduction, which the spec
allows (its order of reduction is implementation-defined) and XLA's rewrite does for any
reducer. Anything else keeps the window loops (`kernels.emit_kernel`).

For a GPU (`parallel_scan_module_text`) the same blocks and combinations, in the same order
(the results are the cpu backend's to the bit), run as three loop nests, each a launch of
many threads rather than one thread looping over everything: every block of every line
scanned on its own, its running value in a register; then per line the blocks' last
elements, each combined with the one before, in order; then every other element of every
block after the first combined with the last element of the block before.
"""

from dataclasses import dataclass

import numpy as np

from mlirxla.ir_queries import defining_op
from mlirxla.mlir import ir
from mlirxla.transforms.algsimp_patterns.common import splat_number
from mlirxla.transforms.algsimp_patterns.reduce import is_identity
from mlirxla.transforms.cost_analysis import integer_list

from .emitters.host_calls import SCATTER_COMBINERS, computation_combiner
from .loop_text import LoopText, element_text, is_unsigned, memref_text
from .scalar_regions import emit_region, evaluate_region, numpy_type, region_reason, returned
from .scatter_kernel import combiner_op

COMPUTATION = "computation"  # a scan's combiner when the reducer is inlined as it is

# the block of each step's first pass: XLA:CPU's ReduceWindowRewriter scans blocks of 128 and
# then the blocks' totals, so a prefix's rounding spans two short chains, not one long one
BLOCK = 128


@dataclass(frozen=True)
class Scan:
    shape: tuple[int, ...]
    axis: int
    reverse: bool
    combiner: str


def scan_of(op: ir.Operation) -> Scan | None:
    """The cumulative reduction `op` is, or None."""
    if len(op.operands) != 2 or len(op.results) != 1:
        return None
    shape = tuple(ir.RankedTensorType(op.operands[0].type).shape)
    rank = len(shape)
    window = integer_list(op, "window_dimensions", [1] * rank)
    padding = integer_list(op, "padding", [0] * (2 * rank))
    if any(integer_list(op, name, [1] * rank) != [1] * rank for name in ("window_strides", "base_dilations", "window_dilations")):
        return None
    scanned = [d for d in range(rank) if window[d] != 1 or padding[2 * d] or padding[2 * d + 1]]
    if len(scanned) != 1:
        return None
    axis = scanned[0]
    length, low, high = shape[axis], padding[2 * axis], padding[2 * axis + 1]
    if window[axis] != length or length < 2 or (low, high) not in ((length - 1, 0), (0, length - 1)):
        return None
    combiner = computation_combiner(op.regions[0])
    element = element_text(op.operands[0].type)
    if combiner in SCATTER_COMBINERS and combiner_op(combiner, element, is_unsigned(op.operands[0].type)) is not None:
        return Scan(shape, axis, low == 0, combiner) if padding_shows_nothing(op.operands[1], combiner) else None
    if element in ("f16", "bf16") or len(returned(op.regions[0])) != 1 or region_reason(op.regions[0]) is not None:
        return None
    return Scan(shape, axis, low == 0, COMPUTATION) if init_is_identity(op) else None


def probe_values(value: ir.Value) -> np.ndarray:
    """Values of every kind of `value`'s element type: zeros, ones, extremes, infinities, NaN."""
    dtype = numpy_type(value)
    if dtype.kind == "f":
        info = np.finfo(dtype)
        return np.array([0.0, -0.0, 1.0, -1.0, 2.5, -3.75, info.max, info.min, info.tiny, info.eps, np.inf, -np.inf, np.nan], dtype)
    if dtype.kind == "b":
        return np.array([False, True])
    info = np.iinfo(dtype)
    return np.array(sorted({0, 1, 7, info.max, info.min, info.min + 1, info.max // 3, -1 if info.min else 2}), dtype)


def init_is_identity(op: ir.Operation) -> bool:
    """Whether the reducer leaves every probe value as it is when combined with the init
    value, on either side."""
    init = splat_number(op.operands[1])
    if init is None:
        return False
    probes = probe_values(op.operands[0])
    init_values = np.full(probes.shape, init, probes.dtype)
    region = op.regions[0]
    for arguments in ((init_values, probes), (probes, init_values)):
        [combined] = evaluate_region(region, list(arguments))
        if not np.array_equal(combined, probes, equal_nan=probes.dtype.kind == "f"):
            return False
    return True


def padding_shows_nothing(init: ir.Value, combiner: str) -> bool:
    """Whether combining `init` once per padded position leaves a window's value as once: the
    combiner's identity, or for an add a zero of either sign (zeros added keep their sum)."""
    if isinstance(ir.RankedTensorType(init.type).element_type, ir.ComplexType):
        return complex_splat(init) == {"add": 0, "multiply": 1}.get(combiner)
    number = splat_number(init)
    if number is None:
        return False
    if combiner == "or":
        return number == 0
    if combiner == "and":
        return number in (1, -1) or number == (1 << ir.IntegerType(ir.RankedTensorType(init.type).element_type).width) - 1
    return (combiner == "add" and number == 0) or is_identity(f"xhlo.{combiner}", init)


def complex_splat(value: ir.Value) -> complex | None:
    """The number in every element of a complex splat constant `value`, else None."""
    op = defining_op(value)
    if op is None or op.name != "xhlo.constant" or not ir.DenseElementsAttr(op.attributes["value"]).is_splat:
        return None
    real, imaginary = (ir.FloatAttr(part).value for part in ir.ArrayAttr(ir.DenseElementsAttr(op.attributes["value"]).get_splat_value()))
    return complex(real, imaginary)


def scan_kernel_text(symbol: str, op: ir.Operation, scan: Scan):
    """A scan kernel's text to write, over (input, init) -> result: the `LoopText`, the
    memref types by name, the element type and `combine(accumulated, value)`, the scan's
    combiner (its one op, or the reducer inlined)."""
    element = element_text(op.operands[0].type)
    memrefs = {name: memref_text(value.type) for name, value in
               (("input", op.operands[0]), ("init", op.operands[1]), ("result", op.results[0]))}
    text = LoopText(symbol, list(memrefs.items()))
    one_op = None if scan.combiner == COMPUTATION else combiner_op(scan.combiner, element, is_unsigned(op.operands[0].type))

    def combine(accumulated: str, value: str) -> str:
        if one_op is None:
            return emit_region(text, op.regions[0], [accumulated, value])[0]
        return text.value(f"{one_op} {accumulated}, {value} : {element}")

    return text, memrefs, element, combine


def scan_module_text(symbol: str, op: ir.Operation, scan: Scan) -> str:
    """The kernel: (input, init) -> result, in two passes over blocks of BLOCK along the axis
    (in scan order: from the end for a reverse scan): each block scanned on its own, the first
    combining the init value; then each block's elements combined with the last element of
    the block before, which is final by then."""
    text, memrefs, element, combine = scan_kernel_text(symbol, op, scan)
    init = text.load("%init", memrefs["init"], [])
    length = scan.shape[scan.axis]
    outer = [text.loop(size, "o") for size in scan.shape[:scan.axis]]
    inner_shape = scan.shape[scan.axis + 1:]

    def physical(step: str) -> str:
        return text.value(f"arith.subi {text.constant(length - 1)}, {step} : index") if scan.reverse else step

    def combine_along(start: str, first_of_block, second_of_block) -> None:
        """For the steps from `start` to the end of its block, result = combine(first, second)
        of the values the callables load at each step's position and inner index."""
        end = text.value(f"arith.minsi {text.value(f'arith.addi {start}, {text.constant(BLOCK)} : index')}, {text.constant(length)} : index")
        step = text.fresh("i")
        text.open(f"scf.for {step} = {start} to {end} step {text.constant(1)}")
        inner = [text.loop(size, "n") for size in inner_shape]
        at = outer + [physical(step)] + inner
        value = combine(first_of_block(step, inner), second_of_block(at))
        text.store(value, "%result", memrefs["result"], at)
        for _ in inner:
            text.close()
        text.close()

    block = text.fresh("b")
    text.open(f"scf.for {block} = {text.constant(0)} to {text.constant(length)} step {text.constant(BLOCK)}")
    inner = [text.loop(size, "n") for size in inner_shape]
    at = outer + [physical(block)] + inner
    value = text.load("%input", memrefs["input"], at)
    with_init = combine(init, value)
    first = text.value(f"arith.cmpi eq, {block}, {text.constant(0)} : index")
    text.store(text.value(f"arith.select {first}, {with_init}, {value} : {element}"), "%result", memrefs["result"], at)
    for _ in inner:
        text.close()
    after_first = text.value(f"arith.addi {block}, {text.constant(1)} : index")
    combine_along(after_first,
                  lambda step, inner: text.load("%result", memrefs["result"],
                                                outer + [physical(text.value(f"arith.subi {step}, {text.constant(1)} : index"))] + inner),
                  lambda at: text.load("%input", memrefs["input"], at))
    text.close()

    block = text.fresh("b")
    text.open(f"scf.for {block} = {text.constant(BLOCK)} to {text.constant(length)} step {text.constant(BLOCK)}")
    last_before = physical(text.value(f"arith.subi {block}, {text.constant(1)} : index"))
    combine_along(block,
                  lambda step, inner: text.load("%result", memrefs["result"], outer + [last_before] + inner),
                  lambda at: text.load("%result", memrefs["result"], at))
    text.close()
    for _ in outer:
        text.close()
    return text.text()


def parallel_scan_module_text(symbol: str, op: ir.Operation, scan: Scan) -> str:
    """The kernel for a GPU: (input, init) -> result in three parallel loop nests (above)."""
    text, memrefs, element, combine = scan_kernel_text(symbol, op, scan)
    length = scan.shape[scan.axis]
    blocks = -(-length // BLOCK)
    outer_shape, inner_shape = list(scan.shape[:scan.axis]), list(scan.shape[scan.axis + 1:])

    def at(outer: list[str], step: str, inner: list[str]) -> list[str]:
        position = text.value(f"arith.subi {text.constant(length - 1)}, {step} : index") if scan.reverse else step
        return outer + [position] + inner

    def block_start(block: str) -> str:
        return text.value(f"arith.muli {block}, {text.constant(BLOCK)} : index")

    def last_of(block: str) -> str:
        end = text.value(f"arith.addi {block_start(block)}, {text.constant(BLOCK - 1)} : index")
        return text.value(f"arith.minsi {end}, {text.constant(length - 1)} : index")

    indices = text.parallel(outer_shape + [blocks] + inner_shape, "p")
    outer, block, inner = indices[:len(outer_shape)], indices[len(outer_shape)], indices[len(outer_shape) + 1:]
    start = block_start(block)
    first_value = text.load("%input", memrefs["input"], at(outer, start, inner))
    with_init = combine(text.load("%init", memrefs["init"], []), first_value)
    is_first = text.value(f"arith.cmpi eq, {block}, {text.constant(0)} : index")
    running = text.value(f"arith.select {is_first}, {with_init}, {first_value} : {element}")
    text.store(running, "%result", memrefs["result"], at(outer, start, inner))
    step, accumulated = text.fresh("i"), text.fresh("a")
    following = text.value(f"arith.addi {start}, {text.constant(1)} : index")
    end = text.value(f"arith.addi {last_of(block)}, {text.constant(1)} : index")
    text.open(f"{text.fresh('s')} = scf.for {step} = {following} to {end} step {text.constant(1)} "
              f"iter_args({accumulated} = {running}) -> ({element})")
    value = combine(accumulated, text.load("%input", memrefs["input"], at(outer, step, inner)))
    text.store(value, "%result", memrefs["result"], at(outer, step, inner))
    text.line(f"scf.yield {value} : {element}")
    text.close()
    text.close_parallel()
    if blocks == 1:
        return text.text()

    lines = text.parallel(outer_shape + inner_shape, "q")
    outer, inner = lines[:len(outer_shape)], lines[len(outer_shape):]
    block, total = text.fresh("b"), text.fresh("t")
    carried = text.load("%result", memrefs["result"], at(outer, text.constant(BLOCK - 1), inner))
    text.open(f"{text.fresh('s')} = scf.for {block} = {text.constant(1)} to {text.constant(blocks)} step {text.constant(1)} "
              f"iter_args({total} = {carried}) -> ({element})")
    last = at(outer, last_of(block), inner)
    value = combine(total, text.load("%result", memrefs["result"], last))
    text.store(value, "%result", memrefs["result"], last)
    text.line(f"scf.yield {value} : {element}")
    text.close()
    text.close_parallel()

    indices = text.parallel(outer_shape + [blocks - 1, BLOCK - 1] + inner_shape, "r")
    outer, inner = indices[:len(outer_shape)], indices[len(outer_shape) + 2:]
    block = text.value(f"arith.addi {indices[len(outer_shape)]}, {text.constant(1)} : index")
    step = text.value(f"arith.addi {block_start(block)}, {indices[len(outer_shape) + 1]} : index")
    text.open(f"scf.if {text.value(f'arith.cmpi slt, {step}, {last_of(block)} : index')}")
    before = text.value(f"arith.subi {block_start(block)}, {text.constant(1)} : index")
    value = combine(text.load("%result", memrefs["result"], at(outer, before, inner)),
                    text.load("%result", memrefs["result"], at(outer, step, inner)))
    text.store(value, "%result", memrefs["result"], at(outer, step, inner))
    text.close()
    text.close_parallel()
    return text.text()
