"""xhlo-narrow-dot-upcast: a dot or convolution of floats narrower than f32 (bf16, f16, the
8-bit floats) becomes an f32 one between converts (XLA:CPU's FloatNormalization of the dots
and convolutions its libraries run in f32).

The CPU backend's GEMMs are f32 (OpenBLAS has no bf16 or f16 GEMM), and XLA:CPU computes a
bf16 or f16 dot as an f32 one: operands widened, products accumulated in f32, the result
rounded once; so it computes their convolutions. An f16 dot left as it was became a loop
kernel accumulating in f16: 15x XLA:CPU's time for 512 x 512 x 512, and 30x its error
against an exact product (a largest error of 0.88 against 0.031); a 3 x 3 convolution of
8 x 32 x 32 x 64 in bf16 was 5x XLA's time, its largest error 8.2 against XLA's 0.25; an f8
dot had no native kernel and ran on the reference interpreter (27 s for 256 x 256). Done
at run time around the GEMM call, the widening and the rounding went through numpy's
ml_dtypes conversions, several times the GEMM's own time for a 256x1024x1024 layer. Done here,
before fusion, they are `convert` ops the fusion passes place like any other elementwise
op: the result's rounding joins the dot's epilogue, an operand's widening joins the fusion
producing it (the activations) or becomes one vectorized kernel (a weight parameter). It
runs before layout assignment, which gives the converts their layouts.

A dot or convolution with narrow operands and an f32 result
(`preferred_element_type=f32`) only has its operands widened.

A bf16 operand the program computes (not a parameter: `x.astype(bf16)`, a bf16 GELU) is
widened through `reduce_precision` to bf16's 8 exponent and 7 mantissa bits. Excess
precision (`backends/cpu/excess_precision.py`) drops a bf16 rounding whose value is widened
again in the same kernel, and the widening added here is such a read: fused with the
operand's producer, it handed the GEMM unrounded f32 values, and `jnp.dot(x.astype(bf16),
w.astype(bf16), preferred_element_type=f32)` was 2.4e-3 (relative to its largest value) from
the product of the bf16 values, XLA:CPU 1e-7. The dot's operands are bf16 values in the
program, as XLA computes them; reduce_precision rounds under excess precision too.

Only the cpu pipeline runs it (cuBLASLt runs bf16 GEMMs natively). Every rewritten op is
listed in `narrow-dot-upcast.txt` (written when there is one). Changed: any op rewritten.
"""

from dataclasses import dataclass
from typing import ClassVar

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir

from .pass_base import ModulePass, PassResult, TextReport
from .priority_fusion import describe

def element_of(value: ir.Value) -> str:
    return str(ir.RankedTensorType(value.type).element_type)


def is_narrow_float(value: ir.Value) -> bool:
    """Whether `value`'s elements are floats of fewer than 32 bits (bf16, f16, the 8-bit ones)."""
    element = ir.RankedTensorType(value.type).element_type
    return isinstance(element, ir.FloatType) and ir.FloatType(element).width < 32


def converted(value: ir.Value, element: ir.Type, location: ir.Location) -> ir.Value:
    shape = ir.RankedTensorType(value.type).shape
    return create_op("xhlo.convert", [value], [ir.RankedTensorType.get(shape, element)], {}, location).results[0]


def bf16_rounded(value: ir.Value, location: ir.Location) -> ir.Value:
    """f32 `value` rounded to bf16's precision and range, kept in f32 (the bf16 round trip,
    bit for bit: bf16 is f32's top 16 bits)."""
    i32 = ir.IntegerType.get_signless(32)
    attributes = {"exponent_bits": ir.IntegerAttr.get(i32, 8), "mantissa_bits": ir.IntegerAttr.get(i32, 7)}
    return create_op("xhlo.reduce_precision", [value], [value.type], attributes, location).results[0]


def widened(value: ir.Value, widenings: dict) -> ir.Value:
    """`value` in f32: one convert per value, placed right after its definition so that it
    serves every dot reading it (the same operand of two dots is widened once). A bf16 value
    the program computes is rounded again after its widening (see the module docstring)."""
    if value not in widenings:
        computed = not isinstance(value.owner, ir.Block)
        if computed:
            point, location = ir.InsertionPoint.after(value.owner), value.owner.location
        else:
            block = value.owner
            point = ir.InsertionPoint.at_block_begin(block)
            location = block.owner.location if block.owner is not None else ir.Location.unknown()
        with point:
            wide = converted(value, ir.F32Type.get(), location)
            if computed and isinstance(ir.RankedTensorType(value.type).element_type, ir.BF16Type):
                wide = bf16_rounded(wide, location)
            widenings[value] = wide
    return widenings[value]


def upcast(op: ir.Operation, widenings: dict) -> None:
    """Replace the dot or convolution `op` by the same op in f32 on its widened operands,
    rounded back when its result is narrow."""
    result_type = ir.RankedTensorType(op.results[0].type)
    location = op.location
    operands = [widened(v, widenings) for v in op.operands]
    with ir.InsertionPoint(op):
        attributes = {name: op.attributes[name] for name in op.attributes}
        wide = create_op(op.name, operands, [ir.RankedTensorType.get(result_type.shape, ir.F32Type.get())], attributes,
                         location).results[0]
        result = converted(wide, result_type.element_type, location) if is_narrow_float(op.results[0]) else wide
    op.results[0].replace_all_uses_with(result)
    op.erase()


def takes(op: ir.Operation) -> bool:
    """Whether `op` has narrow float operands and an f32 result (jax's mixed f8 dots), or
    operands and a result of one narrow float type."""
    elements, result = {element_of(v) for v in op.operands}, element_of(op.results[0])
    return all(is_narrow_float(v) for v in op.operands) and (result == "f32" or elements == {result})


@dataclass(frozen=True)
class NarrowDotUpcastPass(ModulePass):
    """Rewrites bf16, f16 and 8-bit float dots and convolutions as f32 ones between converts."""

    name: ClassVar[str] = "xhlo-narrow-dot-upcast"
    summary: ClassVar[str] = "narrow float dots and convolutions in f32 between converts (the CPU's GEMMs are f32)"

    def run(self, module: ir.Module) -> PassResult:
        lines, widenings = [], {}
        for op in ops_named(module, "xhlo.dot", "xhlo.convolution"):
            if takes(op):
                lines.append(f"{describe(op)}: f32 {op.name[len('xhlo.'):]}, operands widened" +
                             (f", result rounded to {element_of(op.results[0])}" if is_narrow_float(op.results[0]) else ""))
                upcast(op, widenings)
        return PassResult(bool(lines), TextReport({"narrow-dot-upcast.txt": "\n".join(lines) + "\n"} if lines else {}))
