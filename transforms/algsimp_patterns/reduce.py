"""Reductions that reduce nothing (every reduced dimension has size 1, or there are none,
or some reduced dimension has size 0), and reductions over one short dimension.

With size-1 dimensions each result element reduces exactly one input element x, and the
reducer sees it once: body(init, x). When the body is a plain add, multiply, maximum or
minimum (or a bitwise or, and: jnp.any and jnp.all over no axis) this is init (op) x, and
just x when init is the op's identity. Only single-input reduces are rewritten.

A reduce over one dimension of at most `SHORT_DIMENSION` elements whose body is elementwise
ops and constants is its body applied elementwise to the slices along it, in order:
body(body(body(init, x[0]), x[1]), x[2]). jax's `select` takes the argmax of its stacked
conditions, a reduce over a [3, n] concatenate with an iota beside it, which a kernel
materialized whole (14 MB of scratch for n = 1M, 15x XLA:CPU's time); unrolled, the slices
of the concatenate are its operands and those of the iota constants.

A reduce_window whose window moves along one dimension of at most `SHORT_DIMENSION`
elements (every other dimension a window of one, unpadded, unstrided), with such a body, is
the same per output position: the body over the input slices its window covers, the
positions concatenated. jax's `piecewise` takes a cumulative sum over its stacked
conditions ([3, n], a scan kernel over 12 MB: 5.5 ms for n = 1M); unrolled, each position
is one or two adds of slices that fuse with the rest.
"""

import math

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.dialects.xhlo.ops import ELEMENTWISE_OPS
from mlirxla.dialects.xhlo.types import element_of, shape_of
from mlirxla.mlir import ir

from .common import (
    NO_MATCH,
    broadcast,
    int_list,
    int_width,
    is_float,
    is_integer,
    is_negative_zero,
    is_unsigned,
    reshape,
    splat_number,
)

COMBINERS = ("xhlo.add", "xhlo.multiply", "xhlo.maximum", "xhlo.minimum", "xhlo.or", "xhlo.and")
SHORT_DIMENSION = 8
MAX_UNROLLED_OPS = 128  # the body's ops times the dimension's length (an argmax over 8: 72)


def reducer_op(op: ir.Operation) -> str | None:
    """The name of the body's one op when the body is `return(a <op> b)` of its two arguments."""
    block = op.regions[0].blocks[0]
    operations = list(block.operations)
    if len(operations) != 2 or len(block.arguments) != 2:
        return None
    combine, terminator = operations
    if combine.name not in COMBINERS or list(terminator.operands) != list(combine.results):
        return None
    arguments = list(block.arguments)
    if list(combine.operands) not in (arguments, arguments[::-1]):
        return None
    return combine.name


def is_identity(name: str, init: ir.Value) -> bool:
    """init is the identity of the combiner for its element type (exactly: -0.0 for a float add)."""
    number = splat_number(init)
    element = element_of(init.type)
    if number is None:
        return False
    if is_integer(element):
        width = int_width(element)
        if is_unsigned(element) or width == 1:
            low, high = 0, (1 << width) - 1
        else:
            low, high = -(1 << (width - 1)), (1 << (width - 1)) - 1
        ones = -1 if low < 0 else high  # every bit set
        return number == {"xhlo.add": 0, "xhlo.multiply": 1, "xhlo.maximum": low, "xhlo.minimum": high, "xhlo.or": 0, "xhlo.and": ones}[name]
    if is_float(element):
        if name == "xhlo.add":
            return is_negative_zero(number)
        return number == {"xhlo.multiply": 1.0, "xhlo.maximum": -math.inf, "xhlo.minimum": math.inf}.get(name)
    return False


def fold_reduce_unit_dimensions(op: ir.Operation, options):
    """reduce(x, init, dims of size 1) -> reshape(x) when init is the identity; else reshape(x) (op) init."""
    if not options.fold_trivial_reductions or len(op.operands) != 2:
        return NO_MATCH
    operand, init = op.operands
    dimensions = int_list(op, "dimensions")
    if any(shape_of(operand.type)[d] != 1 for d in dimensions):
        return NO_MATCH
    name = reducer_op(op)
    if name is None:
        return NO_MATCH
    identity = is_identity(name, init)
    # float maximum/minimum: only with the identity init (argument order could matter for NaN, +-0)
    if not identity and not is_integer(element_of(init.type)) and name not in ("xhlo.add", "xhlo.multiply"):
        return NO_MATCH
    result_type = op.results[0].type
    location = op.location
    value = reshape(operand, shape_of(result_type), location)
    if identity:
        return value
    spread = broadcast(init, [], result_type, location)
    return create_op(name, [spread, value], [result_type], {}, location).results[0]


def fold_reduce_empty_dimension(op: ir.Operation, options):
    """reduce(x, init, dims) with a reduced dimension of size 0 -> broadcast(init): nothing is reduced."""
    if not options.fold_trivial_reductions or len(op.operands) != 2:
        return NO_MATCH
    operand, init = op.operands
    if all(shape_of(operand.type)[d] != 0 for d in int_list(op, "dimensions")):
        return NO_MATCH
    return broadcast(init, [], op.results[0].type, op.location)


def unrolled_short_reduce(op: ir.Operation, options):
    """reduce(x..., init..., one dimension d of at most SHORT_DIMENSION) with an elementwise
    body -> the body applied to the accumulators (the inits broadcast) and each slice of the
    inputs along d in turn."""
    dimensions = int_list(op, "dimensions")
    count = len(op.operands) // 2
    inputs, inits = list(op.operands[:count]), list(op.operands[count:])
    if len(dimensions) != 1:
        return NO_MATCH
    dimension = dimensions[0]
    size = shape_of(inputs[0].type)[dimension]
    block = op.regions[0].blocks[0]
    body = list(block.operations)[:-1]
    if not 1 <= size <= SHORT_DIMENSION or len(body) * size > MAX_UNROLLED_OPS:
        return NO_MATCH
    if any(inner.name not in ELEMENTWISE_OPS and inner.name != "xhlo.constant" for inner in body):
        return NO_MATCH
    result_shape = shape_of(op.results[0].type)
    accumulators = [broadcast(init, [], result.type, op.location) for init, result in zip(inits, op.results)]
    for index in range(size):
        sliced = [reshape(slice_at(value, dimension, index, op.location), result_shape, op.location) for value in inputs]
        accumulators = body_applied(block, accumulators + sliced, result_shape, op.location)
    return accumulators


def unrolled_short_reduce_window(op: ir.Operation, options):
    """reduce_window(x..., init..., a window moving along one dimension d of at most
    SHORT_DIMENSION elements, no base dilation) with an elementwise body -> per output
    position along d, the body applied to the inits and the elements its window covers (the
    slices of x, the inits where it covers padding), concatenated along d."""
    count = len(op.operands) // 2
    inputs, inits = list(op.operands[:count]), list(op.operands[count:])
    shape, result_shape = shape_of(inputs[0].type), shape_of(op.results[0].type)
    rank = len(shape)

    def attribute(name: str, default: int) -> list[int]:
        return int_list(op, name) if name in op.attributes else [default] * rank

    window, strides, dilations = attribute("window_dimensions", 1), attribute("window_strides", 1), attribute("window_dilations", 1)
    padding = int_list(op, "padding") if "padding" in op.attributes else [0] * (2 * rank)
    moving = [d for d in range(rank) if (window[d], strides[d], dilations[d], padding[2 * d], padding[2 * d + 1]) != (1, 1, 1, 0, 0)]
    if attribute("base_dilations", 1) != [1] * rank or len(moving) != 1:
        return NO_MATCH
    dimension = moving[0]
    if shape[dimension] > SHORT_DIMENSION or result_shape[dimension] > SHORT_DIMENSION:
        return NO_MATCH
    # the input positions each output's window covers, None where it covers padding (whose
    # elements are the inits: the body sees them too, unless they change nothing)
    covered = [without_inert_padding(op, [position if 0 <= position < shape[dimension] else None
                                          for position in (j * strides[dimension] + k * dilations[dimension] - padding[2 * dimension]
                                                           for k in range(window[dimension]))])
               for j in range(result_shape[dimension])]
    block = op.regions[0].blocks[0]
    body = list(block.operations)[:-1]
    if any(inner.name not in ELEMENTWISE_OPS and inner.name != "xhlo.constant" for inner in body):
        return NO_MATCH
    if len(body) * sum(map(len, covered)) > MAX_UNROLLED_OPS:
        return NO_MATCH
    part_shape = [1 if d == dimension else size for d, size in enumerate(result_shape)]
    padded = [broadcast(init, [], ir.RankedTensorType.get(part_shape, element_of(init.type)), op.location) for init in inits]
    # accumulators after the covered positions so far: a window extending the last one's
    # (a cumulative sum) continues from it, the same ops in the same order
    folded = {(): padded}
    parts = []
    for positions in covered:
        done = max(length for length in range(len(positions) + 1) if tuple(positions[:length]) in folded)
        accumulators = folded[tuple(positions[:done])]
        for index in range(done, len(positions)):
            position = positions[index]
            elements = padded if position is None else [slice_at(value, dimension, position, op.location) for value in inputs]
            accumulators = body_applied(block, accumulators + elements, part_shape, op.location)
            folded[tuple(positions[:index + 1])] = accumulators
        parts.append(accumulators)
    if len(parts) == 1:
        return parts[0]
    return [create_op("xhlo.concatenate", [part[index] for part in parts], [result.type],
                      {"dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dimension)}, op.location).results[0]
            for index, result in enumerate(op.results)]


def without_inert_padding(op: ir.Operation, positions: list[int | None]) -> list[int | None]:
    """`positions` without the padding (None) that leaves the accumulator as it is: before the
    first element when the body is one combiner for which init (op) init is init (a cumulative
    sum from 0, a running maximum), anywhere when init is the combiner's exact identity."""
    name = reducer_op(op) if len(op.operands) == 2 else None
    if name is None:
        return positions
    init = op.operands[1]
    identity = is_identity(name, init)
    number = splat_number(init)
    absorbs_itself = identity or name in ("xhlo.maximum", "xhlo.minimum", "xhlo.or", "xhlo.and") or (
        number is not None and ((name == "xhlo.add" and number == 0) or (name == "xhlo.multiply" and number == 1)))
    kept, leading = [], True
    for position in positions:
        if position is None and (identity or (leading and absorbs_itself)):
            continue
        leading = leading and position is None
        kept.append(position)
    return kept


def slice_at(value: ir.Value, dimension: int, index: int, location) -> ir.Value:
    """`value`'s slice at `index` of `dimension`, that dimension kept with size 1."""
    shape = shape_of(value.type)
    starts = [index if d == dimension else 0 for d in range(len(shape))]
    limits = [index + 1 if d == dimension else size for d, size in enumerate(shape)]
    sliced_type = ir.RankedTensorType.get([1 if d == dimension else size for d, size in enumerate(shape)], element_of(value.type))
    attrs = {name: ir.DenseI64ArrayAttr.get(values) for name, values in
             (("start_indices", starts), ("limit_indices", limits), ("strides", [1] * len(shape)))}
    return create_op("xhlo.slice", [value], [sliced_type], attrs, location).results[0]


def body_applied(block: ir.Block, arguments: list[ir.Value], shape: list[int], location) -> list[ir.Value]:
    """The reduce body's elementwise ops on values of `shape` (its scalar constants broadcast)."""
    mapping = dict(zip(block.arguments, arguments))
    terminator = list(block.operations)[-1]
    for inner in list(block.operations)[:-1]:
        result_type = ir.RankedTensorType.get(shape, element_of(inner.results[0].type))
        attrs = {name: inner.attributes[name] for name in inner.attributes if name != "result_layouts"}
        if inner.name == "xhlo.constant":
            scalar = create_op("xhlo.constant", [], [inner.results[0].type], attrs, location).results[0]
            mapping[inner.results[0]] = broadcast(scalar, [], result_type, location)
            continue
        mapping[inner.results[0]] = create_op(inner.name, [mapping[v] for v in inner.operands], [result_type], attrs, location).results[0]
    return [mapping[v] for v in terminator.operands]
