"""Small readers over MLIR types and attributes that the xhlo verifiers share."""

from mlirxla.mlir import ir


def is_tensor(t: ir.Type) -> bool:
    return isinstance(t, ir.RankedTensorType)


def tensor(t: ir.Type) -> ir.RankedTensorType:
    return ir.RankedTensorType(t)


def shape_of(t: ir.Type) -> list[int]:
    return list(ir.RankedTensorType(t).shape)


def element_of(t: ir.Type) -> ir.Type:
    return ir.RankedTensorType(t).element_type


def is_predicate(t: ir.Type) -> bool:
    return isinstance(t, ir.IntegerType) and ir.IntegerType(t).width == 1


def is_scalar_tensor(t: ir.Type) -> bool:
    return is_tensor(t) and tensor(t).rank == 0


def ints(attr: ir.Attribute) -> list[int]:
    """The integers of a dense i64/i32 array attribute, a dense elements attribute or an array of integers."""
    if isinstance(attr, ir.DenseI64ArrayAttr):
        return list(ir.DenseI64ArrayAttr(attr))
    if isinstance(attr, ir.DenseI32ArrayAttr):
        return list(ir.DenseI32ArrayAttr(attr))
    if isinstance(attr, ir.DenseIntElementsAttr):
        return [int(x) for x in ir.DenseIntElementsAttr(attr)]
    if isinstance(attr, ir.ArrayAttr):
        return [ir.IntegerAttr(a).value for a in ir.ArrayAttr(attr)]
    raise TypeError(f"expected an integer array, got {attr}")


DOT_DIMENSION_KEYS = ("lhs_batching_dimensions", "rhs_batching_dimensions", "lhs_contracting_dimensions", "rhs_contracting_dimensions")


def dot_dimension_numbers(op: ir.Operation) -> dict[str, list[int]]:
    """An xhlo.dot's dimension numbers by name, each one there: an empty list is left out of
    the attribute (an outer product contracts nothing, an einsum 'a,a->a' only batches)."""
    numbers = ir.DictAttr(op.attributes["dot_dimension_numbers"])
    return {key: ints(numbers[key]) if key in numbers else [] for key in DOT_DIMENSION_KEYS}


def int_value(attr: ir.Attribute) -> int:
    return ir.IntegerAttr(attr).value


def string_value(attr: ir.Attribute) -> str:
    return ir.StringAttr(attr).value


def i64_array(values) -> ir.Attribute:
    return ir.DenseI64ArrayAttr.get([int(v) for v in values])


def type_list(types) -> str:
    return ", ".join(str(t) for t in types)


def bit_width(element: ir.Type) -> int:
    """Bits of one element: integers and floats by width, complex as two of its parts."""
    if isinstance(element, ir.ComplexType):
        return 2 * bit_width(element.element_type)
    return element.width
