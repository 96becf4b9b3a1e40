"""StableHLO attributes <-> xhlo's builtin-attribute encoding, both directions.

xhlo keeps its attributes in builtin form so that passes read them without StableHLO's
Python classes: enums become strings (`#stablehlo<comparison_direction LT>` -> "LT"),
precision configs become arrays of strings, dimension-number structs become dictionaries
of `array<i64>` / integer entries. Attributes of any other kind pass through unchanged.
"""

import re

from mlirxla.mlir import ir, stablehlo

# attribute name -> the StableHLO enum mnemonic that spells it
ENUM_ATTRIBUTES = {
    "comparison_direction": "comparison_direction",
    "compare_type": "comparison_type",
    "fft_type": "fft_type",
    "rng_algorithm": "rng_algorithm",
    "rng_distribution": "rng_distribution",
    "transpose_a": "transpose",
}

# struct attribute mnemonic (#stablehlo.<mnemonic><...>) by the attribute names that carry it
STRUCT_ATTRIBUTES = {
    "dot_dimension_numbers": "dot",
    "channel_handle": "channel_handle",
}

CONV_FIELDS = (
    "input_batch_dimension",
    "input_feature_dimension",
    "input_spatial_dimensions",
    "kernel_input_feature_dimension",
    "kernel_output_feature_dimension",
    "kernel_spatial_dimensions",
    "output_batch_dimension",
    "output_feature_dimension",
    "output_spatial_dimensions",
)

# integer fields of a struct that StableHLO prints only where they differ from 0
ZERO_DEFAULT_FIELDS = {
    "gather": ("index_vector_dim",),
    "scatter": ("index_vector_dim",),
}

_ENUM_TEXT = re.compile(r"#stablehlo<\w+ (\w+)>")
_STRUCT_FIELD = re.compile(r"(\w+) = (\[[^\]]*\]|-?\d+)")


def enum_value(attr: ir.Attribute) -> str:
    match = _ENUM_TEXT.fullmatch(str(attr))
    if not match:
        raise ValueError(f"not a StableHLO enum attribute: {attr}")
    return match.group(1)


def struct_to_dict(attr: ir.Attribute, zero_default_fields: tuple[str, ...] = ()) -> ir.Attribute:
    """`#stablehlo.dot<lhs_batching_dimensions = [0], ...>` -> `{lhs_batching_dimensions = array<i64: 0>, ...}`.
    The fields of `zero_default_fields` are written even where the text leaves them out
    (their value is then 0), so that passes read every integer field of the struct."""
    entries = {field: ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0) for field in zero_default_fields}
    for key, value in _STRUCT_FIELD.findall(str(attr)):
        if value.startswith("["):
            numbers = [int(v) for v in value[1:-1].split(",") if v.strip()]
            entries[key] = ir.DenseI64ArrayAttr.get(numbers)
        else:
            entries[key] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(value))
    return ir.DictAttr.get(entries)


def dict_to_struct(mnemonic: str, attr: ir.Attribute) -> ir.Attribute:
    fields = []
    for named in ir.DictAttr(attr):
        value = named.attr
        if isinstance(value, ir.DenseI64ArrayAttr):
            fields.append(f"{named.name} = [{', '.join(str(v) for v in ir.DenseI64ArrayAttr(value))}]")
        else:
            fields.append(f"{named.name} = {ir.IntegerAttr(value).value}")
    return ir.Attribute.parse(f"#stablehlo.{mnemonic}<{', '.join(fields)}>")


def conv_to_dict(attr: ir.Attribute) -> ir.Attribute:
    numbers = stablehlo.ConvDimensionNumbers(attr)
    entries = {}
    for field in CONV_FIELDS:
        value = getattr(numbers, field)
        if isinstance(value, int):
            entries[field] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
        else:
            entries[field] = ir.DenseI64ArrayAttr.get(list(value))
    return ir.DictAttr.get(entries)


def dict_to_conv(attr: ir.Attribute) -> ir.Attribute:
    entries = ir.DictAttr(attr)
    values = []
    for field in CONV_FIELDS:
        value = entries[field]
        values.append(list(ir.DenseI64ArrayAttr(value)) if isinstance(value, ir.DenseI64ArrayAttr) else ir.IntegerAttr(value).value)
    return stablehlo.ConvDimensionNumbers.get(*values)


def to_xhlo(op_name: str, name: str, attr: ir.Attribute) -> ir.Attribute:
    """The xhlo encoding of attribute `name` of StableHLO op `op_name`."""
    if name in ENUM_ATTRIBUTES:
        return ir.StringAttr.get(enum_value(attr))
    if name == "precision_config":
        return ir.ArrayAttr.get([ir.StringAttr.get(enum_value(a)) for a in ir.ArrayAttr(attr)])
    if name in STRUCT_ATTRIBUTES:
        return struct_to_dict(attr)
    if name == "scatter_dimension_numbers":
        return struct_to_dict(attr, ZERO_DEFAULT_FIELDS["scatter"])
    if name == "dimension_numbers":
        return conv_to_dict(attr) if "conv" in op_name else struct_to_dict(attr, ZERO_DEFAULT_FIELDS["gather"])
    return attr


def to_stablehlo(op_name: str, name: str, attr: ir.Attribute) -> ir.Attribute:
    """Inverse of `to_xhlo` for StableHLO op `op_name`."""
    if name in ENUM_ATTRIBUTES:
        return ir.Attribute.parse(f"#stablehlo<{ENUM_ATTRIBUTES[name]} {ir.StringAttr(attr).value}>")
    if name == "precision_config":
        return ir.ArrayAttr.get(
            [ir.Attribute.parse(f"#stablehlo<precision {ir.StringAttr(a).value}>") for a in ir.ArrayAttr(attr)]
        )
    if name in STRUCT_ATTRIBUTES:
        return dict_to_struct(STRUCT_ATTRIBUTES[name], attr)
    if name == "scatter_dimension_numbers":
        return dict_to_struct("scatter", attr)
    if name == "dimension_numbers":
        if "conv" in op_name:
            return dict_to_conv(attr)
        return dict_to_struct("gather", attr)
    return attr
