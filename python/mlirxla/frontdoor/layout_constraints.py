"""Layout constraints inside a program (`custom_call @LayoutConstraint`, which jax emits for
`with_sharding_constraint(x, Format(layout, sharding))`) become the value they constrain.

A layout is where a value's elements lie in memory, not what they are: every mlirxla buffer
is row-major, so a constraint asking for the row-major layout (`result_layouts` minor to
major [rank - 1, ..., 0], XLA's default) holds already. A constraint asking for another
layout is refused, naming it: honouring it would need buffers in other layouts, and
dropping it would return the value in a layout the program did not ask for.
"""

from mlirxla.errors import MlirxlaError, location_text
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir
from mlirxla.transforms.erasure import live_ops

from .check_calls import target_name
from .memory_placements import replace_by_operands

TARGET = "LayoutConstraint"


def constraints_to_values(module: ir.Module) -> None:
    for op in live_ops(ops_named(module, "stablehlo.custom_call")):
        if target_name(op) != TARGET:
            continue
        for result, layout in zip(op.results, result_layouts(op)):
            row_major = list(range(ir.RankedTensorType(result.type).rank - 1, -1, -1))
            if layout != row_major:
                raise MlirxlaError(f"custom_call @{TARGET}: layout minor-to-major {layout} (mlirxla buffers are row-major, "
                                   f"{row_major})", location_text(op.location))
        replace_by_operands(op)


def result_layouts(op: ir.Operation) -> list[list[int]]:
    """Each result's minor-to-major layout; [] for a result the op gives none."""
    if "result_layouts" not in op.attributes:
        return []
    return [[int(v) for v in ir.DenseIntElementsAttr(layout)] for layout in ir.ArrayAttr(op.attributes["result_layouts"])]
