"""The StableHLO test conventions that are calls of the test harness, not computation.

The StableHLO project's testdata modules compare `@main`'s result with `@expected()` through
custom calls named after the check ops (`stablehlo.custom_call @check.expect_close(%result,
%expected)`). They become the `check` dialect's ops (judged after execution like the
interpreter tests' checks); any result the custom call declares is replaced by a true
predicate, since the check's outcome is reported, not computed.

The interpreter tests' `interpreter.print %v` prints a value as the program runs: it becomes a
side-effecting `@mlirxla.print` custom call, which backends run as a host call.
"""

from mlirxla.dialects.check import CHECK_OPS
from mlirxla.errors import MlirxlaError, location_text
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir
from mlirxla.transforms.erasure import erase, live_ops

CHECK_NAMES = {cls.OPERATION_NAME for cls in CHECK_OPS}
PRINT_TARGET = "mlirxla.print"


def target_name(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["call_target_name"]).value


def custom_calls_to_checks(module: ir.Module) -> None:
    for op in live_ops(ops_named(module, "stablehlo.custom_call")):
        target = target_name(op)
        if not target.startswith("check."):
            continue
        if target not in CHECK_NAMES:
            raise MlirxlaError(f"unknown check '{target}' (known: {', '.join(sorted(CHECK_NAMES))})", location_text(op.location))
        with ir.InsertionPoint(op), op.location:
            ir.Operation.create(target, operands=list(op.operands))
            for result in op.results:
                true = ir.DenseElementsAttr.get_splat(ir.RankedTensorType(result.type), ir.BoolAttr.get(True))
                constant = ir.Operation.create("stablehlo.constant", results=[result.type], attributes={"value": true})
                result.replace_all_uses_with(constant.results[0])
        erase(op)


def prints_to_custom_calls(module: ir.Module) -> None:
    for op in live_ops(ops_named(module, "interpreter.print")):
        with ir.InsertionPoint(op), op.location:
            ir.Operation.create("stablehlo.custom_call", operands=list(op.operands), attributes={
                "call_target_name": ir.StringAttr.get(PRINT_TARGET), "has_side_effect": ir.BoolAttr.get(True)})
        erase(op)
