"""Read xhlo text whose segment-size attributes were left out.

The printer (`mlirxla.printing`) drops `operandSegmentSizes` / `resultSegmentSizes` from xhlo
ops because they follow from the operand and result counts (dialects/xhlo/builder.py:
`segment_sizes`). IRDL needs them to verify, so text without them is first parsed in a
context where xhlo is not loaded (its ops parse as unregistered ops), the attributes are
added back, and the module is printed in generic form for the real context to parse.
"""

from mlirxla.dialects.xhlo.builder import op_classes, segment_sizes
from mlirxla.mlir import ext, ir, stablehlo

SEGMENT_ATTRIBUTES = ("operandSegmentSizes", "resultSegmentSizes")


def needs_segments(text: str) -> bool:
    return '"xhlo.' in text


def add_missing_segments(op: ir.Operation, classes: dict[str, type]) -> None:
    op_class = classes.get(op.name)
    if op_class is None:
        return
    operand_defs = [f for f in op_class._fields if isinstance(f, ext.OperandDef)]
    result_defs = [f for f in op_class._fields if isinstance(f, ext.ResultDef)]
    for attribute, defs, count, what in (
        ("operandSegmentSizes", operand_defs, len(op.operands), "operands"),
        ("resultSegmentSizes", result_defs, len(op.results), "results"),
    ):
        if attribute in op.attributes:
            continue
        sizes = segment_sizes(defs, count, what)
        if sizes is not None:
            op.attributes[attribute] = ir.DenseI32ArrayAttr.get(sizes, context=op.context)


def with_segments(text: str) -> str:
    """`text` in generic form with every derivable segment-size attribute present."""
    plain = ir.Context()
    plain.allow_unregistered_dialects = True
    stablehlo.register_dialect(plain)
    classes = op_classes()
    with plain, ir.Location.unknown():
        module = ir.Module.parse(text)

        def visit(op):
            add_missing_segments(op.operation, classes)
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
        return module.operation.get_asm(print_generic_op_form=True, enable_debug_info=True)
