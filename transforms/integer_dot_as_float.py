"""xhlo-integer-dot-as-float: a dot of narrow integers becomes a float dot between converts
where the float computes every sum exactly.

The CPU backend's GEMMs are OpenBLAS's f32 and f64 ones; an integer dot ran as generated
loops, one 32-bit vector multiply per product (`jnp.dot` of two 512x512 int8 matrices into
int32: 5.2 ms, XLA:CPU's VNNI kernels 1.4). Narrow integers are exact in a float, and so is
every partial sum while it stays within the float's integers: a dot of K products of
operands at most `a` and `b` in magnitude never exceeds K a b. The dot becomes an f32 dot
when that bound is at most 2^24, an f64 one when it is at most 2^53, its operands widened
by converts fusion places like any elementwise op, its result converted back through a
32-bit integer (64-bit for an i64 result) that holds the bound. A bound past what that
integer holds keeps the integer dot: XLA's integer sums wrap, a float's conversion
saturates. So does a result narrower than 32 bits (`jnp.dot` of int8 into int8): its
generated loops multiply 8- or 16-bit lanes, and ran faster than the GEMM and its converts.

With `byte_gemms` (the cpu pipeline's on a host with `avx512_vnni`), a dot the cpu backend
runs as its byte GEMM stays an integer dot: int8 or uint8 rows by int8 columns into int32, one
GEMM with its lhs not transposed (`backends/cpu/byte_gemm.py`: `vpdpbusd`, four times the
multiply-adds of an f32 GEMM an instruction, and no widened copies).

The cuda pipeline runs it too (cuBLASLt's GEMMs are float as well), with `tf32_operands`: its
f32 GEMMs read TF32, which holds integers up to 2^11 exactly, so a wider operand takes f64.
The cpu pipeline runs it beside the narrow float upcast. Every rewritten or kept dot is
listed in `integer-dot-as-float.txt`. Changed: any dot rewritten.
"""

import math
from dataclasses import dataclass
from typing import ClassVar

from mlirxla.dialects.xhlo.builder import create_op
from mlirxla.dialects.xhlo.types import shape_of
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir

from .narrow_dot_upcast import converted
from .dot_canonicalizer import DotNumbers, gemm_shape
from .pass_base import ModulePass, PassResult, TextReport
from .priority_fusion import describe

NARROW_BITS = (8, 16)
F32_EXACT, F64_EXACT = 2 ** 24, 2 ** 53
TF32_EXACT = 2 ** 11  # the integers TF32 holds (a GPU's f32 GEMM on tensor cores rounds its operands to it)


def magnitude(element: ir.Type) -> int | None:
    """The largest magnitude of a narrow integer type's values, None for other types."""
    if not isinstance(element, ir.IntegerType) or element.width not in NARROW_BITS:
        return None
    integer = ir.IntegerType(element)
    return (1 << integer.width) - 1 if integer.is_unsigned else 1 << (integer.width - 1)


def float_for(dot: ir.Operation, tf32_operands: bool = False) -> tuple[ir.Type, ir.Type] | None:
    """(the float that sums `dot` exactly, the integer its result passes through), or None;
    `tf32_operands`: the f32 GEMM reads its operands as TF32."""
    magnitudes = [magnitude(ir.RankedTensorType(v.type).element_type) for v in dot.operands]
    result = ir.RankedTensorType(dot.results[0].type).element_type
    if None in magnitudes or not isinstance(result, ir.IntegerType) or ir.IntegerType(result).width < 32:
        return None
    lhs_shape = shape_of(dot.operands[0].type)
    bound = math.prod(lhs_shape[d] for d in DotNumbers.of(dot).lhs_contracting) * magnitudes[0] * magnitudes[1]
    through = ir.IntegerType.get_signless(64 if ir.IntegerType(result).width == 64 else 32)
    if bound >= 1 << (ir.IntegerType(through).width - 1):
        return None
    if bound <= F32_EXACT and (not tf32_operands or max(magnitudes) <= TF32_EXACT):
        return ir.F32Type.get(), through
    return (ir.F64Type.get(), through) if bound <= F64_EXACT else None


def element_names(dot: ir.Operation) -> tuple[str, str, str]:
    lhs, rhs = (str(ir.RankedTensorType(value.type).element_type) for value in dot.operands)
    return lhs, rhs, str(ir.RankedTensorType(dot.results[0].type).element_type)


def byte_gemm_refusal(dot: ir.Operation) -> str | None:
    """Why the cpu backend's byte GEMM does not take `dot`, or None when it does; the host
    is not asked."""
    shape = gemm_shape(dot)
    lhs, rhs, result = element_names(dot)
    if lhs not in ("i8", "ui8") or rhs != "i8" or result != "i32":
        return f"its elements {lhs} x {rhs} -> {result} are not int8 or uint8 rows by int8 columns into int32"
    if shape is None:
        return "its dimension numbers are no GEMM over row-major buffers"
    batch, _, _, _, transpose_lhs, _ = shape
    if batch != 1:
        return f"a batch of {batch}"
    if transpose_lhs:
        return "its left operand is transposed"
    return None


def as_float(dot: ir.Operation, wide: ir.Type, through: ir.Type) -> None:
    """Replace `dot` by the `wide` dot of its converted operands, converted back through `through`."""
    result_type = ir.RankedTensorType(dot.results[0].type)
    location = dot.location
    with ir.InsertionPoint(dot):
        operands = [converted(v, wide, location) for v in dot.operands]
        attributes = {name: dot.attributes[name] for name in dot.attributes}
        product = create_op("xhlo.dot", operands, [ir.RankedTensorType.get(result_type.shape, wide)], attributes, location).results[0]
        result = converted(product, through, location)
        if through != result_type.element_type:  # an unsigned result
            result = converted(result, result_type.element_type, location)
    dot.results[0].replace_all_uses_with(result)
    dot.erase()


@dataclass(frozen=True)
class IntegerDotAsFloatPass(ModulePass):
    """Rewrites narrow integer dots as float dots that sum them exactly."""

    name: ClassVar[str] = "xhlo-integer-dot-as-float"
    summary: ClassVar[str] = "narrow integer dots as exact f32 or f64 dots between converts (the CPU's GEMMs are float)"
    byte_gemms: bool = False  # the backend runs int8 GEMMs into int32 itself (`backends/cpu/byte_gemm.py`)
    tf32_operands: bool = False  # the backend's f32 GEMMs round their operands to TF32 (a GPU's tensor cores)

    def run(self, module: ir.Module) -> PassResult:
        lines = []
        for dot in ops_named(module, "xhlo.dot"):
            if self.byte_gemms and byte_gemm_refusal(dot) is None:
                lines.append(f"{describe(dot)}: kept, the byte GEMM on VNNI")
                continue
            chosen = float_for(dot, self.tf32_operands)
            if chosen is not None:
                lines.append(f"{describe(dot)}: {chosen[0]} dot, exact")
                as_float(dot, *chosen)
        return PassResult(bool(lines), TextReport({"integer-dot-as-float.txt": "\n".join(lines) + "\n"} if lines else {}))
