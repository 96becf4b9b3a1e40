"""What the iree backend refuses before IREE sees it: ops IREE 3.13 does not take, element
types it cannot carry, and ops it compiles wrong or crashes on (each reason says which), with
the op's location. The rules are what the StableHLO interpreter suite showed on llvm-cpu
(`mlirxla-conformance --backend iree`); the list and what was seen are in docs/iree-backend.md.
What IREE rejects on its own is refused by IREE's first error, at its location
(`iree_compile.refusal`)."""

import re

from mlirxla.errors import MlirxlaError, location_text
from mlirxla.ir_queries import first_op_where
from mlirxla.mlir import ir

REFUSED_OPS = {
    "stablehlo.custom_call": "IREE runs no XLA custom calls",
    "stablehlo.infeed": "IREE has no infeed",
    "stablehlo.outfeed": "IREE has no outfeed",
    "stablehlo.send": "IREE has no host transfers",
    "stablehlo.recv": "IREE has no host transfers",
}

# element types IREE 3.13 cannot hold in a tensor: sub-byte integers are not packed
# ("does not have integral number of total bytes", or no numpy mapping on the way back), and
# these small floats have no HAL element type
REFUSED_ELEMENT_TYPES = {
    "i2": "IREE 3.13 does not pack sub-byte integers", "ui2": "IREE 3.13 does not pack sub-byte integers",
    "i4": "IREE 3.13 does not pack sub-byte integers", "ui4": "IREE 3.13 does not pack sub-byte integers",
    "f4E2M1FN": "IREE 3.13 has no HAL element type for it", "f6E2M3FN": "IREE 3.13 has no HAL element type for it",
    "f6E3M2FN": "IREE 3.13 has no HAL element type for it", "f8E3M4": "IREE 3.13 has no HAL element type for it",
    "f8E4M3": "IREE 3.13 has no HAL element type for it", "f8E4M3B11FNUZ": "IREE 3.13 has no HAL element type for it",
}

# f64 (and complex<f64>) math whose llvm-cpu code IREE 3.13 fails to link (no f64 libm
# routine in its runtime library), or gets wrong (power: NaN)
F64_MATH = {"stablehlo.sine", "stablehlo.cosine", "stablehlo.tan", "stablehlo.tanh", "stablehlo.atan2", "stablehlo.remainder",
            "stablehlo.power", "stablehlo.cbrt"}
# complex<f64> math IREE 3.13 fails to link or legalize
COMPLEX_F64_MATH = F64_MATH | {"stablehlo.sqrt", "stablehlo.rsqrt", "stablehlo.exponential_minus_one", "stablehlo.log_plus_one",
                               "stablehlo.fft"}


def element_type_name(value_type: ir.Type) -> str:
    text = str(value_type)
    match = re.match(r"tensor<(?:[?\d]+x)*(.+?)(?:, .*)?>$", text)
    return match.group(1) if match else text


def op_types(op) -> list[str]:
    return [element_type_name(v.type) for v in list(op.operands) + list(op.results)]


def reason_to_refuse(op) -> str | None:
    """Why the backend refuses `op`, or None."""
    if op.name in REFUSED_OPS:
        return REFUSED_OPS[op.name]
    types = op_types(op)
    for name in types:
        if name in REFUSED_ELEMENT_TYPES:
            return f"{name}: {REFUSED_ELEMENT_TYPES[name]}"
    if op.name in COMPLEX_F64_MATH and "complex<f64>" in types:
        return "IREE 3.13 fails to link or legalize it on complex<f64>"
    if op.name in F64_MATH and "f64" in types[:1]:
        return "IREE 3.13's llvm-cpu code for it on f64 fails to link or computes NaN"
    if op.name in ("stablehlo.maximum", "stablehlo.minimum") and types[0].startswith("complex"):
        return "IREE 3.13 orders complex numbers otherwise than StableHLO (lexicographically), and answers wrong"
    if op.name == "stablehlo.add" and types[0] == "i1":
        return "IREE 3.13 adds i1 modulo 2 (xor), where StableHLO's add on i1 is or"
    if op.name in ("stablehlo.bitcast_convert", "stablehlo.convert") and types[0] == "complex<f64>" and types[-1].startswith("complex"):
        return "IREE 3.13's compiler crashes on it (from complex<f64> to complex)"
    return None


def refuse_unsupported(module) -> None:
    """Raise on the first op the backend refuses, naming it and where it is."""
    refused = []

    def wanted(op) -> bool:
        reason = reason_to_refuse(op)
        if reason is not None:
            refused.append(reason)
        return reason is not None

    op = first_op_where(module, wanted)
    if op is not None:
        target = f" @{ir.StringAttr(op.attributes['call_target_name']).value}" if op.name == "stablehlo.custom_call" else ""
        raise MlirxlaError(f"the iree backend cannot compile '{op.name}'{target}: {refused[0]}", location_text(op.location))
