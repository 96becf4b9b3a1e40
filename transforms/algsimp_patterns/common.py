"""What the algebraic simplifier's rewrites share: reading constants and element types.

A rewrite is `rewrite(op, options) -> ir.Value | NO_MATCH`: the value that replaces the op's
single result, built at the op (the driver sets the insertion point and the location), or
NO_MATCH when it does not apply. Guard clauses come first, so a rewrite that does not match
has built nothing.
"""

import math

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.dialects.xhlo.types import element_of, ints, shape_of
from mlirxla.ir_queries import defining_op
from mlirxla.mlir import ir

NO_MATCH = None


def produced_by(value: ir.Value, name: str) -> ir.Operation | None:
    """The op defining `value` when it is an `xhlo.<name>`, else None."""
    op = defining_op(value)
    return op if op is not None and op.name == f"xhlo.{name}" else None


def splat_attribute(value: ir.Value) -> ir.Attribute | None:
    """The element attribute of a splat `xhlo.constant` defining `value` (directly or through a
    broadcast, which keeps a splat a splat), else None."""
    broadcast = produced_by(value, "broadcast")
    if broadcast is not None:
        value = broadcast.operands[0]
    op = produced_by(value, "constant")
    if op is None:
        return None
    attr = op.attributes["value"]
    if not isinstance(attr, ir.DenseElementsAttr) or not attr.is_splat:
        return None
    element = element_of(value.type)
    if not (isinstance(element, ir.IntegerType) or isinstance(element, ir.FloatType)):
        return None  # complex splats come back as [re, im] arrays that get_splat refuses
    return attr.get_splat_value()


# ---------------------------------------------------------------- element kinds


def is_pred(element: ir.Type) -> bool:
    return isinstance(element, ir.IntegerType) and ir.IntegerType(element).width == 1


def is_integer(element: ir.Type) -> bool:
    """Integers, i1 included (every integer op is exact, so identities hold bit for bit)."""
    return isinstance(element, ir.IntegerType)


def is_float(element: ir.Type) -> bool:
    return isinstance(element, ir.FloatType)


def is_unsigned(element: ir.Type) -> bool:
    return isinstance(element, ir.IntegerType) and ir.IntegerType(element).is_unsigned


def int_width(element: ir.Type) -> int:
    return ir.IntegerType(element).width


def splat_number(value: ir.Value) -> int | float | None:
    """The value every element of a splat integer or float constant holds, else None.

    Integers come back as Python ints with their type's signedness (i1 as 0 or 1), floats as
    Python floats (the sign of a zero kept).
    """
    attr = splat_attribute(value)
    if attr is None:
        return None
    element = element_of(value.type)
    if is_pred(element):
        return int(ir.BoolAttr(attr).value)
    if is_integer(element):
        number = ir.IntegerAttr(attr).value
        width = int_width(element)
        return number % (1 << width) if is_unsigned(element) else number
    if is_float(element):
        return ir.FloatAttr(attr).value
    return None


def is_negative_zero(number) -> bool:
    return isinstance(number, float) and number == 0.0 and math.copysign(1.0, number) < 0


def is_positive_zero(number) -> bool:
    return isinstance(number, float) and number == 0.0 and math.copysign(1.0, number) > 0


# ---------------------------------------------------------------- building


def splat_constant(element_attr: ir.Attribute, result_type: ir.Type, location) -> ir.Value:
    """An `xhlo.constant` of `result_type` with every element `element_attr`."""
    value = ir.DenseElementsAttr.get_splat(ir.RankedTensorType(result_type), element_attr)
    return create_op("xhlo.constant", [], [result_type], {"value": value}, location).results[0]


def bool_constant(flag: bool, result_type: ir.Type, location) -> ir.Value:
    return splat_constant(ir.BoolAttr.get(flag), result_type, location)


def reshape(value: ir.Value, shape: list[int], location) -> ir.Value:
    """`value` reshaped to `shape` (no op when it already has that shape)."""
    if shape_of(value.type) == list(shape):
        return value
    result_type = ir.RankedTensorType.get(list(shape), element_of(value.type))
    return create_op("xhlo.reshape", [value], [result_type], {}, location).results[0]


def broadcast(value: ir.Value, dimensions: list[int], result_type: ir.Type, location) -> ir.Value:
    """HLO broadcast of `value` (operand dimension i -> result dimension dimensions[i])."""
    if str(value.type) == str(result_type) and list(dimensions) == list(range(len(dimensions))):
        return value
    attrs = {"dimensions": ir.DenseI64ArrayAttr.get([int(d) for d in dimensions])}
    return create_op("xhlo.broadcast", [value], [result_type], attrs, location).results[0]


def int_list(op: ir.Operation, name: str) -> list[int]:
    return ints(op.attributes[name])
