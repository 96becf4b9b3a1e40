"""xhlo-bf16-dot-upcast: a bf16 dot becomes an f32 dot between converts (XLA:CPU's
FloatNormalization of the dots its libraries run in f32).

The CPU backend's GEMMs are f32 (OpenBLAS has no bf16 GEMM), and XLA:CPU computes a bf16 dot
as an f32 one: operands widened, products accumulated in f32, the result rounded once. Done
at run time around the GEMM call, the widening and the rounding went through numpy's
ml_dtypes conversions, several times the GEMM's own time for a 256x1024x1024 layer. Done here,
before fusion, they are `convert` ops the fusion passes place like any other elementwise
op: the result's rounding joins the dot's epilogue, an operand's widening joins the fusion
producing it (the activations) or becomes one vectorized kernel (a weight parameter). It
runs before layout assignment, which gives the converts their layouts.

A dot with bf16 operands and an f32 result (`preferred_element_type=f32`) only has its
operands widened. Only the cpu pipeline runs it (cuBLASLt runs bf16 GEMMs natively). Every
rewritten dot is listed in `bf16-dot-upcast.txt` (written when there is one). Changed: any
dot rewritten.
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir

from .pass_base import ModulePass, PassResult, TextReport
from .priority_fusion import describe

NARROW = "bf16"


def element_of(value: ir.Value) -> str:
    return str(ir.RankedTensorType(value.type).element_type)


def converted(value: ir.Value, element: ir.Type, location: ir.Location) -> ir.Value:
    shape = ir.RankedTensorType(value.type).shape
    return create_op("xhlo.convert", [value], [ir.RankedTensorType.get(shape, element)], {}, location).results[0]


def widened(value: ir.Value, widenings: dict) -> ir.Value:
    """`value` in f32: one convert per value, placed right after its definition so that it
    serves every dot reading it (the same operand of two dots is widened once)."""
    if value not in widenings:
        if isinstance(value.owner, ir.Block):
            block = value.owner
            point = ir.InsertionPoint.at_block_begin(block)
            location = block.owner.location if block.owner is not None else ir.Location.unknown()
        else:
            point, location = ir.InsertionPoint.after(value.owner), value.owner.location
        with point:
            widenings[value] = converted(value, ir.F32Type.get(), location)
    return widenings[value]


def upcast(dot: ir.Operation, widenings: dict) -> None:
    """Replace `dot` by the f32 dot of its widened operands, rounded back when its result is bf16."""
    result_type = ir.RankedTensorType(dot.results[0].type)
    location = dot.location
    operands = [widened(v, widenings) for v in dot.operands]
    with ir.InsertionPoint(dot):
        attributes = {name: dot.attributes[name] for name in dot.attributes}
        wide = create_op("xhlo.dot", operands, [ir.RankedTensorType.get(result_type.shape, ir.F32Type.get())], attributes,
                         location).results[0]
        result = converted(wide, result_type.element_type, location) if str(result_type.element_type) == NARROW else wide
    dot.results[0].replace_all_uses_with(result)
    dot.erase()


def takes(dot: ir.Operation) -> bool:
    """Whether `dot` has bf16 operands and a bf16 or f32 result."""
    return (all(element_of(v) == NARROW for v in dot.operands)
            and element_of(dot.results[0]) in (NARROW, "f32"))


@dataclass(frozen=True)
class Bf16DotUpcastPass(ModulePass):
    """Rewrites bf16 dots as f32 dots between converts."""

    name: ClassVar[str] = "xhlo-bf16-dot-upcast"
    summary: ClassVar[str] = "bf16 dots as f32 dots between converts (the CPU's GEMMs are f32)"

    def run(self, module: ir.Module) -> PassResult:
        lines, widenings = [], {}
        for dot in ops_named(module, "xhlo.dot"):
            if takes(dot):
                lines.append(f"{describe(dot)}: f32 dot, operands widened" +
                             (", result rounded to bf16" if element_of(dot.results[0]) == NARROW else ""))
                upcast(dot, widenings)
        return PassResult(bool(lines), TextReport({"bf16-dot-upcast.txt": "\n".join(lines) + "\n"} if lines else {}))
