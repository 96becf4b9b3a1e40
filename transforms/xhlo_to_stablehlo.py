"""Lower xhlo back to StableHLO, the inverse of the front door's legalization.

This is how an xhlo module reaches the StableHLO reference interpreter (the correctness
oracle) and, later, StableHLO-based lowerings. Most ops map one to one; the HLO-only ops
lower to what they mean: `fusion` inlines its fused computation, `copy` forwards its
operand, `bitcast` becomes a reshape, `conditional` becomes `stablehlo.case` (or
`stablehlo.if` on a predicate) whose branches call the branch computations.
"""

from mlirxla.errors import MlirxlaError, location_text
from mlirxla.frontdoor import attributes
from mlirxla.frontdoor.stablehlo_to_xhlo import RENAMED_OPS, move_regions, replace_op
from mlirxla.ir_queries import ops_in_dialect, ops_named
from mlirxla.mlir import func, ir

from .erasure import erase, live_ops
from .rewriting import splice_block

# xhlo op -> (StableHLO op, {xhlo attribute name: StableHLO attribute name})
REVERSED_OPS = {
    xhlo: (shlo, {new: old for old, new in renames.items()}) for shlo, (xhlo, renames) in RENAMED_OPS.items()
}
SEGMENT_ATTRIBUTES = ("operandSegmentSizes", "resultSegmentSizes")
XHLO_ONLY_ATTRIBUTES = ("result_layouts", "xhlo.sharding")


def stablehlo_attributes(op: ir.Operation, shlo_name: str, renames: dict[str, str]) -> dict:
    result = {}
    for name in op.attributes:
        if name in SEGMENT_ATTRIBUTES or (name in XHLO_ONLY_ATTRIBUTES and not custom_call_layouts(op, name)):
            continue
        target = renames.get(name, name)
        result[target] = attributes.to_stablehlo(shlo_name, target, op.attributes[name])
    return result


def custom_call_layouts(op: ir.Operation, name: str) -> bool:
    """Whether `name` is a custom call's StableHLO `result_layouts`, which StableHLO requires
    together with its `operand_layouts` (other ops' `result_layouts` are layout assignment's)."""
    return name == "result_layouts" and op.name == "xhlo.custom_call" and "operand_layouts" in op.attributes


def lower_generic(op: ir.Operation, shlo_name: str, renames: dict[str, str]) -> None:
    with ir.InsertionPoint(op):
        new = ir.Operation.create(
            shlo_name,
            results=[r.type for r in op.results],
            operands=list(op.operands),
            attributes=stablehlo_attributes(op, shlo_name, renames),
            regions=len(op.regions),
            loc=op.location,
        )
    move_regions(op, new)
    replace_op(op, new)


def forward_operands(op: ir.Operation) -> None:
    for result, operand in zip(op.results, op.operands):
        result.replace_all_uses_with(operand)
    erase(op)


def inline_fusion(op: ir.Operation) -> None:
    splice_block(op.regions[0].blocks[0], op)


def lower_bitcast(op: ir.Operation) -> None:
    with ir.InsertionPoint(op):
        new = ir.Operation.create(
            "stablehlo.reshape", results=[op.results[0].type], operands=[op.operands[0]], loc=op.location
        )
    replace_op(op, new)


def lower_call(op: ir.Operation) -> None:
    callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
    with ir.InsertionPoint(op), op.location:
        call = func.CallOp([r.type for r in op.results], callee, list(op.operands))
    replace_op(op, call.operation)


def lower_conditional(op: ir.Operation) -> None:
    selector = op.operands[0]
    branch_operands = list(op.operands)[1:]
    counts = list(ir.DenseI64ArrayAttr(op.attributes["branch_operand_counts"]))
    branches = [ir.FlatSymbolRefAttr(b).value for b in ir.ArrayAttr(op.attributes["branch_computations"])]
    is_predicate = ir.IntegerType(ir.RankedTensorType(selector.type).element_type).width == 1
    result_types = [r.type for r in op.results]
    with ir.InsertionPoint(op):
        new = ir.Operation.create(
            "stablehlo.if" if is_predicate else "stablehlo.case",
            results=result_types,
            operands=[selector],
            regions=len(branches),
            loc=op.location,
        )
    start = 0
    for region, callee, count in zip(new.regions, branches, counts):
        block = region.blocks.append()
        with ir.InsertionPoint(block), op.location:
            call = func.CallOp(result_types, callee, branch_operands[start : start + count])
            ir.Operation.create("stablehlo.return", operands=list(call.results))
        start += count
    replace_op(op, new)


SPECIAL_LOWERINGS = {
    "xhlo.fusion": inline_fusion,
    "xhlo.copy": forward_operands,
    "xhlo.bitcast": lower_bitcast,
    "xhlo.call": lower_call,
    "xhlo.conditional": lower_conditional,
}


def lower_module(module: ir.Module) -> None:
    """Rewrite every xhlo op of `module` in place into StableHLO (fusions inlined first)."""
    with module.context, ir.Location.unknown():
        for op in live_ops(reversed(ops_named(module, "xhlo.fusion"))):
            inline_fusion(op)
        for op in live_ops(ops_in_dialect(module, "xhlo")):
            if op.name in SPECIAL_LOWERINGS:
                SPECIAL_LOWERINGS[op.name](op)
            elif op.name in REVERSED_OPS:
                lower_generic(op, *REVERSED_OPS[op.name])
            elif op.name.startswith("xhlo."):
                lower_generic(op, "stablehlo." + op.name.removeprefix("xhlo."), {})
            else:
                raise MlirxlaError(f"cannot lower '{op.name}' to StableHLO", location_text(op.location))
