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
