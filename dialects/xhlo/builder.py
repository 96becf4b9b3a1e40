"""Build xhlo ops from Python with result types inferred where HLO defines them.

`create_op` is the generic constructor (it fills the segment-size attributes that ops with
variadic operands or results need); `XhloBuilder` offers one method per common op for code
that composes computations (chlo compositions, rewrites):

    b = XhloBuilder(loc)
    y = b.multiply(x, b.splat(0.5, x))
"""

import functools

import numpy as np

from mlirxla.errors import MlirxlaError, location_text
from mlirxla.mlir import ext, ir

from .dialect import Xhlo
from .ops import SLOTS_VARIABLE, WIDE
from .types import element_of, shape_of


def op_classes() -> dict[str, type]:
    return {cls.OPERATION_NAME: cls for cls in Xhlo.operations}


def field_groups(field_defs) -> list[list]:
    """Fields grouped as the op's logical operand (or result) lists: a single value, a
    homogeneous variadic group, or the run of optional slots `stem_0`, `stem_1`, ..."""
    groups: list[list] = []
    for field in field_defs:
        stem = field.name.rsplit("_", 1)[0]
        is_slot = field.variadicity == ext.Variadicity.optional
        if is_slot and groups and groups[-1][0].variadicity == ext.Variadicity.optional and groups[-1][0].name.rsplit("_", 1)[0] == stem:
            groups[-1].append(field)
        else:
            groups.append([field])
    return groups


def segment_sizes(field_defs, count: int, what: str) -> list[int] | None:
    """Segment sizes for `count` values, or None when IRDL needs none (one list at most).

    The lists of one op share the values left after the single ones equally (reduce: inputs
    and init values; scatter: inputs and updates; while: all its operands).
    """
    return group_segment_sizes(field_groups(field_defs), count, what)


def group_segment_sizes(groups: list[list], count: int, what: str) -> list[int] | None:
    """`segment_sizes` over fields already grouped (`field_groups`)."""
    lists = [g for g in groups if g[0].variadicity != ext.Variadicity.single]
    if len(lists) == 1 and len(lists[0]) == 1:
        return None
    if not lists:
        return None
    share = (count - (len(groups) - len(lists))) // len(lists)
    sizes: list[int] = []
    for group in groups:
        if group[0].variadicity == ext.Variadicity.single:
            sizes.append(1)
        elif group[0].variadicity == ext.Variadicity.variadic:
            sizes.append(share)
        else:
            if share > len(group):
                raise ValueError(f"{share} {what} exceed the {len(group)} slots of '{group[0].name.rsplit('_', 1)[0]}'"
                                 + (f" ({SLOTS_VARIABLE}={share} or more raises the limit)" if len(group) == WIDE else ""))
            sizes.extend([1] * share + [0] * (len(group) - share))
    return sizes


@functools.cache
def operand_and_result_groups(name: str) -> tuple[list[list], list[list]]:
    """The grouped operand and result fields of xhlo op `name`, worked out once per op (the
    fusion op's 64 operand and 64 result slots made this a large part of building fusions)."""
    fields = op_classes()[name]._fields
    return (field_groups([f for f in fields if isinstance(f, ext.OperandDef)]),
            field_groups([f for f in fields if isinstance(f, ext.ResultDef)]))


@functools.lru_cache(maxsize=1024)
def op_segment_sizes(name: str, operands: int, results: int) -> tuple[list[int] | None, list[int] | None]:
    """The operand and result segment sizes of xhlo op `name` with these counts, worked out once
    per op and counts (a fusion's 64 slots each, for every fusion a pass builds)."""
    operand_groups, result_groups = operand_and_result_groups(name)
    return (group_segment_sizes(operand_groups, operands, "operands"), group_segment_sizes(result_groups, results, "results"))


def create_op(name: str, operands, result_types, attributes: dict, location=None, region_count: int = 0) -> ir.Operation:
    """Create xhlo op `name` generically at the current insertion point."""
    attributes = dict(attributes)
    location = location or ir.Location.current
    try:
        operand_sizes, result_sizes = op_segment_sizes(name, len(operands), len(result_types))
    except ValueError as error:
        raise MlirxlaError(f"{name}: {error}", location_text(location)) from None
    if operand_sizes is not None:
        attributes["operandSegmentSizes"] = ir.DenseI32ArrayAttr.get(operand_sizes)
    if result_sizes is not None:
        attributes["resultSegmentSizes"] = ir.DenseI32ArrayAttr.get(result_sizes)
    return ir.Operation.create(
        name,
        results=list(result_types),
        operands=list(operands),
        attributes=attributes,
        regions=region_count,
        loc=location,
    )


def transposed(value: ir.Value, permutation: list[int], location: ir.Location) -> ir.Value:
    """`value` with its dimensions in `permutation`'s order (itself when that is the identity)."""
    if permutation == list(range(len(permutation))):
        return value
    value_type = ir.RankedTensorType(value.type)
    shape = [value_type.shape[d] for d in permutation]
    result_type = ir.RankedTensorType.get(shape, value_type.element_type)
    return create_op("xhlo.transpose", [value], [result_type], {"permutation": ir.DenseI64ArrayAttr.get(permutation)}, location).results[0]


def i1_like(value: ir.Value) -> ir.Type:
    return ir.RankedTensorType.get(shape_of(value.type), ir.IntegerType.get_signless(1))


def dense_splat(value, like_type: ir.Type) -> ir.Attribute:
    """`value` in every element of `like_type` (a complex element gets it as its real part:
    the bindings build no complex splat, so it is parsed)."""
    element = element_of(like_type)
    shaped = ir.RankedTensorType(like_type)
    if isinstance(element, ir.ComplexType):
        return ir.Attribute.parse(f"dense<({float(value)!r}, 0.0)> : {shaped}")
    if isinstance(element, ir.IntegerType):
        if ir.IntegerType(element).width == 1:
            return ir.DenseElementsAttr.get_splat(shaped, ir.BoolAttr.get(bool(value)))
        return ir.DenseElementsAttr.get_splat(shaped, ir.IntegerAttr.get(element, int(value)))
    return ir.DenseElementsAttr.get_splat(shaped, ir.FloatAttr.get(element, float(value)))


def splat_of_type(element: ir.Attribute, result_type: ir.Type) -> ir.Attribute:
    """A splat's element (`DenseElementsAttr.get_splat_value`) in every element of
    `result_type`: a complex element comes back as its two parts, and the bindings build no
    complex splat, so that one is parsed from the parts' own printed values."""
    if isinstance(element, ir.ArrayAttr):
        real, imaginary = (str(part).split(" : ")[0] for part in element)
        return ir.Attribute.parse(f"dense<({real}, {imaginary})> : {result_type}")
    return ir.DenseElementsAttr.get_splat(ir.RankedTensorType(result_type), element)


class XhloBuilder:
    """Creates xhlo ops at the current insertion point, all at one location."""

    def __init__(self, location: ir.Location):
        self.location = location

    def op(self, name: str, operands, result_type, **attributes) -> ir.Value:
        return create_op(f"xhlo.{name}", operands, [result_type], attributes, self.location).results[0]

    def unary(self, name: str, x: ir.Value) -> ir.Value:
        return self.op(name, [x], x.type)

    def binary(self, name: str, x: ir.Value, y: ir.Value) -> ir.Value:
        return self.op(name, [x, y], x.type)

    def add(self, x, y):
        return self.binary("add", x, y)

    def subtract(self, x, y):
        return self.binary("subtract", x, y)

    def multiply(self, x, y):
        return self.binary("multiply", x, y)

    def divide(self, x, y):
        return self.binary("divide", x, y)

    def maximum(self, x, y):
        return self.binary("maximum", x, y)

    def minimum(self, x, y):
        return self.binary("minimum", x, y)

    def negate(self, x):
        return self.unary("negate", x)

    def splat(self, value, like: ir.Value) -> ir.Value:
        """A constant shaped like `like` with every element `value`."""
        return self.op("constant", [], like.type, value=dense_splat(value, like.type))

    def constant(self, array: np.ndarray, element: ir.Type) -> ir.Value:
        attr = ir.DenseElementsAttr.get(np.ascontiguousarray(array), type=element)
        return self.op("constant", [], attr.type, value=attr)

    def compare(self, x, y, direction: str, compare_type: str = "FLOAT") -> ir.Value:
        return self.op(
            "compare",
            [x, y],
            i1_like(x),
            comparison_direction=ir.StringAttr.get(direction),
            compare_type=ir.StringAttr.get(compare_type),
        )

    def select(self, pred, on_true, on_false) -> ir.Value:
        return self.op("select", [pred, on_true, on_false], on_true.type)

    def convert(self, x, element: ir.Type) -> ir.Value:
        return self.op("convert", [x], ir.RankedTensorType.get(shape_of(x.type), element))
