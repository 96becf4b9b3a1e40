"""A padded reduce_window as a generated loop kernel (XLA:CPU's ReduceWindow emitter: per
result element, the reducer over its window's positions, padding read as the init value).

The linalg lowering pads the operand first: `jax.lax.reduce_window(..., "SAME")` of a
16 x 128 x 128 x 32 input with a 3 x 3 window at stride 2 copied all 32 MiB into scratch to
add one row and one column, and ran at twice XLA:CPU's time. Here the loops run over the
result's elements in row-major order and, per element, over its window's positions, unrolled
(at most `MAX_WINDOW_POSITIONS`): the value starts as the init value and the reducer folds
in each position's element in row-major order, the init value where the position is padding
(the spec pads with it). A position that may fall outside the operand reads a clamped index,
so every load stays in bounds, and its element is replaced by the init value. The innermost
result dimension reads consecutive elements when its window and stride are 1 (the channels
of NHWC pooling), so it vectorizes.

Taken: one operand, f32 or f64 or integer elements, a reducer that is one of add, multiply,
maximum, minimum, or, and of its two arguments, no base or window dilation, and padding
somewhere (an unpadded window keeps the linalg lowering, as fast as XLA's)."""

import itertools
import math

from mlirxla.mlir import ir
from mlirxla.transforms.cost_analysis import integer_list

from .emitters.host_calls import computation_combiner
from .loop_text import LoopText, element_text, is_unsigned, memref_text
from .scatter_kernel import combiner_op
from .select_and_scatter_kernel import Window, clamped, inside_operand, with_leading

MAX_WINDOW_POSITIONS = 64  # unrolled in the kernel: pooling's are 4 or 9
ELEMENTS = ("f32", "f64", "i1", "i8", "i16", "i32", "i64")


def window_of(op: ir.Operation, leading: int | None = None) -> Window:
    """The reduce_window's geometry (its result as the `source_shape`); with `leading`, of a
    block of that many entries of the leading dimension."""
    operand, result = (tuple(ir.RankedTensorType(v.type).shape) for v in (op.operands[0], op.results[0]))
    rank = len(operand)
    padding = integer_list(op, "padding", [0] * (2 * rank))
    window = Window(operand, result, tuple(integer_list(op, "window_dimensions", [1] * rank)),
                    tuple(integer_list(op, "window_strides", [1] * rank)), tuple(padding[0::2]))
    if leading is None:
        return window
    return Window((leading, *operand[1:]), (leading, *result[1:]), window.dimensions, window.strides, window.padding_low)


def kernel_reason(op: ir.Operation) -> str | None:
    """Why this reduce_window keeps the linalg lowering, or None when it is this kernel."""
    if len(op.operands) != 2:
        return "several operands"
    element = element_text(op.operands[0].type)
    if element not in ELEMENTS:
        return f"{element} elements"
    if combiner_op(computation_combiner(op.regions[0]), element, is_unsigned(op.operands[0].type)) is None:
        return "a reducer other than add, multiply, maximum, minimum, or, and"
    rank = ir.RankedTensorType(op.operands[0].type).rank
    if any(integer_list(op, name, [1] * rank) != [1] * rank for name in ("base_dilations", "window_dilations")):
        return "dilated"
    if math.prod(integer_list(op, "window_dimensions", [1] * rank)) > MAX_WINDOW_POSITIONS:
        return f"windows of over {MAX_WINDOW_POSITIONS} positions"
    if not any(integer_list(op, "padding", [0] * (2 * rank))):
        return "no padding"
    return None


def reduce_window_module_text(symbol: str, op: ir.Operation, leading: int | None = None) -> str:
    """The kernel: (operand, init) -> result (with `leading`: a block of that many entries of
    the leading dimension, which windows must not span)."""
    window = window_of(op, leading)
    element = element_text(op.operands[0].type)
    combine = combiner_op(computation_combiner(op.regions[0]), element, is_unsigned(op.operands[0].type))
    values = {"operand": op.operands[0], "init": op.operands[1], "result": op.results[0]}
    memrefs = {name: memref_text(value.type if leading is None or name == "init" else with_leading(value.type, leading))
               for name, value in values.items()}
    text = LoopText(symbol, list(memrefs.items()))
    init = text.load("%init", memrefs["init"], [])
    result_index = [text.loop(size, "r") for size in window.source_shape]
    corner = [index if stride == 1 else text.value(f"arith.muli {index}, {text.constant(stride)} : index")
              for index, stride in zip(result_index, window.strides)]
    reduced = init
    for offsets in itertools.product(*(range(extent) for extent in window.dimensions)):
        position = [shifted(text, at, offset - low) for at, offset, low in zip(corner, offsets, window.padding_low)]
        inside = inside_operand(text, window, position)
        read_at = position if inside is None else [clamped(text, at, size) for at, size in zip(position, window.operand_shape)]
        element_value = text.load("%operand", memrefs["operand"], read_at)
        if inside is not None:
            element_value = text.value(f"arith.select {inside}, {element_value}, {init} : {element}")
        reduced = text.value(f"{combine} {reduced}, {element_value} : {element}")
    text.store(reduced, "%result", memrefs["result"], result_index)
    for _ in window.source_shape:
        text.close()
    return text.text()


def shifted(text: LoopText, at: str, by: int) -> str:
    if by == 0:
        return at
    return text.value(f"arith.addi {at}, {text.constant(by)} : index" if by > 0 else f"arith.subi {at}, {text.constant(-by)} : index")
