"""A `dot_general` carrying a precision algorithm becomes the plain dot of its operands
rounded to the algorithm's precision type.

jax lowers a dot whose inputs it wants computed in bf16 (`jax.nn.dot_product_attention` on
bf16 values, `precision=` / `preferred_element_type`) to a dot of f32 values with
`algorithm = <lhs_precision_type = bf16, rhs_precision_type = bf16, accumulation_type = f32>`:
the operands rounded to bf16, the products accumulated in f32. The toolkit's
`stablehlo-legalize-to-linalg` does not lower a dot_general with an algorithm: the kernel
failed to bufferize and ran on the reference interpreter, whose dot takes seconds (jax's
attention tests timed out). Here each operand whose element type is wider than its
precision type is converted to it and back, and the algorithm dropped: the dot that
remains accumulates in the result's type, which is the algorithm's accumulation type.

Only algorithms of one primitive operation and one component per operand, accumulating in
the result's element type, are rewritten (the others keep failing to lower and fall back).
"""

from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir, stablehlo


def round_operands_to_algorithm_precision(module: ir.Module) -> int:
    """Rewrite every such dot_general of `module`; how many."""
    rewritten = 0
    for op in ops_named(module, "stablehlo.dot_general"):
        if "algorithm" not in op.attributes:
            continue
        algorithm = stablehlo.DotAlgorithm(op.attributes["algorithm"])
        result_element = ir.RankedTensorType(op.results[0].type).element_type
        if (algorithm.accumulation_type != result_element or algorithm.num_primitive_operations != 1
                or algorithm.lhs_component_count != 1 or algorithm.rhs_component_count != 1):
            continue
        with ir.InsertionPoint(op), op.location:
            for position, precision in ((0, algorithm.lhs_precision_type), (1, algorithm.rhs_precision_type)):
                op.operands[position] = rounded(op.operands[position], precision)
        del op.attributes["algorithm"]
        rewritten += 1
    return rewritten


def rounded(value: ir.Value, precision: ir.Type) -> ir.Value:
    """`value` rounded to `precision` and converted back, when its elements are another type."""
    tensor = ir.RankedTensorType(value.type)
    if tensor.element_type == precision:
        return value
    narrow = ir.RankedTensorType.get(tensor.shape, precision)
    converted = ir.Operation.create("stablehlo.convert", results=[narrow], operands=[value]).results[0]
    return ir.Operation.create("stablehlo.convert", results=[tensor], operands=[converted]).results[0]
