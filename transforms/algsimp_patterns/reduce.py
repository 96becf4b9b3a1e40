"""Reductions that reduce nothing: every reduced dimension has size 1 (or there are none),
or some reduced dimension has size 0.

With size-1 dimensions each result element reduces exactly one input element x, and the
reducer sees it once: body(init, x). When the body is a plain add, multiply, maximum or
minimum (or a bitwise or, and: jnp.any and jnp.all over no axis) this is init (op) x, and
just x when init is the op's identity. Only single-input reduces are rewritten.
"""

import math

from mlirxla.dialects.xhlo.builder import create_op
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
