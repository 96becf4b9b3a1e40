"""A computation on scalars (a reduce_window's reducer, a scatter's update computation) as the
arith and math text of a loop kernel (`loop_text.py`), and the same computation evaluated in
numpy, so that a kernel can ask what the computation does with given values.

jax's `lax.cumlogsumexp` reduces by log-add-exp: max(a, b) + log1p(exp(-|a - b|)), NaN where
a - b is. Kernels that knew only one-op combiners (add, maximum, ...) left such a reduction to
its window loops, n * n / 2 evaluations per row. Any computation of the ops below now inlines
into the kernel's loop. expm1 and log1p are written as XLA's elemental emitter computes them
(`elemental_math.py`'s algorithms: `math.log1p` would become log(1 + x), which loses every
digit near 0); the math functions take f32 and f64 only; float division only (an integer one
must define division by zero as XLA does); booleans only and, or, xor, select and equality
(arith's i1 add is a xor, StableHLO's an or).
"""

import numpy as np

from mlirxla.mlir import ir
from mlirxla.runtime.literals import storage_dtype
from mlirxla.transforms.algsimp_patterns.common import splat_number
from mlirxla.transforms.fusion_legality import kind_of

from .elemental_math import LOG1P_P, LOG1P_Q, LOG1P_SMALL
from .loop_text import LoopText, element_text, is_float, is_unsigned

FLOAT_BINARY = {"add": "arith.addf", "subtract": "arith.subf", "multiply": "arith.mulf", "divide": "arith.divf",
                "maximum": "arith.maximumf", "minimum": "arith.minimumf"}
INTEGER_BINARY = {"add": "arith.addi", "subtract": "arith.subi", "multiply": "arith.muli", "maximum": "arith.maxsi",
                  "minimum": "arith.minsi", "and": "arith.andi", "or": "arith.ori", "xor": "arith.xori"}
UNSIGNED_BINARY = INTEGER_BINARY | {"maximum": "arith.maxui", "minimum": "arith.minui"}
MATH = {"exponential": "math.exp", "log": "math.log", "sqrt": "math.sqrt", "rsqrt": "math.rsqrt", "tanh": "math.tanh",
        "abs": "math.absf"}
FLOAT_PREDICATES = {"EQ": "oeq", "NE": "une", "LT": "olt", "LE": "ole", "GT": "ogt", "GE": "oge"}
SIGNED_PREDICATES = {"EQ": "eq", "NE": "ne", "LT": "slt", "LE": "sle", "GT": "sgt", "GE": "sge"}
UNSIGNED_PREDICATES = SIGNED_PREDICATES | {"LT": "ult", "LE": "ule", "GT": "ugt", "GE": "uge"}
MATH_ELEMENTS = ("f32", "f64")

NUMPY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide, "maximum": np.maximum,
    "minimum": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor, "negate": np.negative,
    "abs": np.abs, "exponential": np.exp, "log": np.log, "log_plus_one": np.log1p, "exponential_minus_one": np.expm1,
    "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "tanh": np.tanh, "select": np.where,
}
NUMPY_COMPARES = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal, "GT": np.greater,
                  "GE": np.greater_equal}


def body_ops(region: ir.Region) -> list[ir.Operation]:
    """The region's ops before its return."""
    return [op.operation for op in list(region.blocks[0].operations)[:-1]]


def returned(region: ir.Region) -> list[ir.Value]:
    return list(list(region.blocks[0].operations)[-1].operation.operands)


def element_of(value: ir.Value) -> str:
    return element_text(value.type)


def direction(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["comparison_direction"]).value


def compare_type(op: ir.Operation) -> str:
    """FLOAT, SIGNED or UNSIGNED: the attribute, or what the operands' type implies."""
    if "compare_type" in op.attributes:
        return ir.StringAttr(op.attributes["compare_type"]).value
    operand = op.operands[0]
    return "FLOAT" if is_float(element_of(operand)) else "UNSIGNED" if is_unsigned(operand.type) else "SIGNED"


def op_reason(op: ir.Operation) -> str | None:
    """Why `op` cannot be written as kernel text, or None."""
    kind = kind_of(op)
    if any(ir.RankedTensorType(v.type).rank != 0 for v in list(op.operands) + list(op.results)):
        return f"{kind} of a tensor"
    element = element_of(op.operands[0]) if len(op.operands) else element_of(op.results[0])
    if kind == "constant":
        if splat_number(op.results[0]) is None or (is_float(element) and element not in MATH_ELEMENTS):
            return f"a {element} constant"
        return None
    if kind == "select":
        return None
    if element == "i1" and kind not in ("and", "or", "xor", "select", "constant") and not (kind == "compare" and direction(op) in ("EQ", "NE")):
        return f"{kind} of booleans"  # arith's i1 add is a xor and its signed max a min: StableHLO's are or and or
    if kind == "compare":
        return None if compare_type(op) in ("FLOAT", "SIGNED", "UNSIGNED") else f"a {compare_type(op)} compare"
    if kind in FLOAT_BINARY or kind in INTEGER_BINARY:
        table = FLOAT_BINARY if is_float(element) else UNSIGNED_BINARY if is_unsigned(op.operands[0].type) else INTEGER_BINARY
        return None if kind in table else f"{kind} of {element}"
    if kind == "negate" and not is_float(element):
        return None
    if kind in MATH or kind in ("negate", "log_plus_one", "exponential_minus_one"):
        return None if element in MATH_ELEMENTS or (kind == "negate" and is_float(element)) else f"{kind} of {element}"
    return f"no kernel text for {kind}"


def region_reason(region: ir.Region) -> str | None:
    """Why the computation cannot be written as kernel text, or None."""
    for op in body_ops(region):
        if (reason := op_reason(op)) is not None:
            return reason
    return None


def emit_region(text: LoopText, region: ir.Region, arguments: list[str]) -> list[str]:
    """The computation's ops as text reading `arguments` (SSA names); its results' names.
    `region_reason` must have found nothing."""
    names = dict(zip(region.blocks[0].arguments, arguments))
    for op in body_ops(region):
        names[op.results[0]] = emit_op(text, op, [names[v] for v in op.operands])
    return [names[v] for v in returned(region)]


def emit_op(text: LoopText, op: ir.Operation, operands: list[str]) -> str:
    kind = kind_of(op)
    element = element_of(op.results[0])
    if kind == "constant":
        return constant_text(text, splat_number(op.results[0]), element)
    if kind == "select":
        return text.value(f"arith.select {operands[0]}, {operands[1]}, {operands[2]} : {element}")
    if kind == "compare":
        operand_element = element_of(op.operands[0])
        if compare_type(op) == "FLOAT":
            return text.value(f"arith.cmpf {FLOAT_PREDICATES[direction(op)]}, {operands[0]}, {operands[1]} : {operand_element}")
        predicates = UNSIGNED_PREDICATES if compare_type(op) == "UNSIGNED" else SIGNED_PREDICATES
        return text.value(f"arith.cmpi {predicates[direction(op)]}, {operands[0]}, {operands[1]} : {operand_element}")
    if kind == "negate":
        if is_float(element):
            return text.value(f"arith.negf {operands[0]} : {element}")
        return text.value(f"arith.subi {text.constant(0, element)}, {operands[0]} : {element}")
    if kind == "log_plus_one":
        return log1p_text(text, operands[0], element)
    if kind == "exponential_minus_one":
        return expm1_text(text, operands[0], element)
    if kind in MATH:
        return text.value(f"{MATH[kind]} {operands[0]} : {element}")
    table = FLOAT_BINARY if is_float(element) else UNSIGNED_BINARY if is_unsigned(op.operands[0].type) else INTEGER_BINARY
    return text.value(f"{table[kind]} {operands[0]}, {operands[1]} : {element}")


def constant_text(text: LoopText, number, element: str) -> str:
    """A constant of `element`: a float by its bits (exact), an integer as it is."""
    if element == "f32":
        return text.constant(f"0x{int(np.float32(number).view(np.uint32)):08X}", element)
    if element == "f64":
        return text.constant(f"0x{int(np.float64(number).view(np.uint64)):016X}", element)
    if element == "i1":
        return text.constant("true" if number else "false", element)
    width = int(element[1:])
    return text.constant(int(number) - (1 << width) if int(number) >= 1 << (width - 1) else int(number), element)


def binary(text: LoopText, op: str, a: str, b: str, element: str) -> str:
    return text.value(f"{op} {a}, {b} : {element}")


def horner_text(text: LoopText, x: str, coefficients: list[float], element: str) -> str:
    accumulated = constant_text(text, coefficients[0], element)
    for coefficient in coefficients[1:]:
        accumulated = binary(text, "arith.addf", binary(text, "arith.mulf", accumulated, x, element),
                             constant_text(text, coefficient, element), element)
    return accumulated


def log1p_text(text: LoopText, x: str, element: str) -> str:
    """log(1 + x) as `elemental_math.log1p` computes it (Cephes near 0, log(x + 1) beyond)."""
    square = binary(text, "arith.mulf", x, x, element)
    ratio = binary(text, "arith.divf", horner_text(text, x, LOG1P_P, element), horner_text(text, x, LOG1P_Q, element), element)
    tail = binary(text, "arith.addf", binary(text, "arith.mulf", constant_text(text, -0.5, element), square, element),
                  binary(text, "arith.mulf", binary(text, "arith.mulf", x, square, element), ratio, element), element)
    near_zero = binary(text, "arith.addf", x, tail, element)
    far = text.value(f"math.log {binary(text, 'arith.addf', x, constant_text(text, 1.0, element), element)} : {element}")
    small = text.value(f"arith.cmpf olt, {text.value(f'math.absf {x} : {element}')}, {constant_text(text, LOG1P_SMALL, element)} : {element}")
    return text.value(f"arith.select {small}, {near_zero}, {far} : {element}")


def expm1_text(text: LoopText, x: str, element: str) -> str:
    """e^x - 1 as `elemental_math.expm1` computes it: tanh(x/2) (e^x + 1) for |x| <= 1/2."""
    half = binary(text, "arith.mulf", x, constant_text(text, 0.5, element), element)
    e = text.value(f"math.exp {x} : {element}")
    near_zero = binary(text, "arith.mulf", text.value(f"math.tanh {half} : {element}"),
                       binary(text, "arith.addf", e, constant_text(text, 1.0, element), element), element)
    far = binary(text, "arith.subf", e, constant_text(text, 1.0, element), element)
    large = text.value(f"arith.cmpf ogt, {text.value(f'math.absf {x} : {element}')}, {constant_text(text, 0.5, element)} : {element}")
    value = text.value(f"arith.select {large}, {far}, {near_zero} : {element}")
    zero_half = text.value(f"arith.cmpf oeq, {half}, {constant_text(text, 0.0, element)} : {element}")
    return text.value(f"arith.select {zero_half}, {x}, {value} : {element}")


def evaluate_region(region: ir.Region, arguments: list[np.ndarray]) -> list[np.ndarray]:
    """The computation applied elementwise to numpy arrays of its arguments' element types
    (`region_reason` found nothing)."""
    values = dict(zip(region.blocks[0].arguments, arguments))
    with np.errstate(all="ignore"):
        for op in body_ops(region):
            operands = [values[v] for v in op.operands]
            kind = kind_of(op)
            if kind == "constant":
                values[op.results[0]] = np.asarray(splat_number(op.results[0]), dtype=numpy_type(op.results[0]))
            elif kind == "compare":
                values[op.results[0]] = NUMPY_COMPARES[direction(op)](*operands)
            else:
                values[op.results[0]] = np.asarray(NUMPY[kind](*operands), dtype=numpy_type(op.results[0]))
    return [values[v] for v in returned(region)]


def numpy_type(value: ir.Value) -> np.dtype:
    return np.dtype(storage_dtype(ir.RankedTensorType(value.type).element_type))
