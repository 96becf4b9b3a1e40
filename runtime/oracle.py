"""The oracle: the input StableHLO evaluated directly by the StableHLO reference interpreter.

`mlirxla-run --check` holds what mlirxla computed (import -> xhlo -> verify -> execute) to
this. The oracle skips xhlo entirely: it only inlines calls, reads shardings as one device
does (sharding annotations are identities, `shard_map` bodies inlined), computes ApproxTopK
exactly as XLA:CPU does (a sort and a slice), turns chlo ops into
StableHLO with jaxlib's own legalization (so that our chlo compositions are checked against
it), and hands the module to the interpreter.
"""

from dataclasses import dataclass

import numpy as np

from mlirxla import frontdoor
from mlirxla.context import new_context
from mlirxla.frontdoor import approx_top_k, jaxlib_bridge, shardings
from mlirxla.frontdoor.load import load_bytes
from mlirxla.ir_queries import ops_named
from mlirxla.mlir import ir, stablehlo
from mlirxla.transforms.sharding_remover import forward_annotations

from . import literals, reference


@dataclass(frozen=True)
class Comparison:
    matches: bool
    summary: str


def has_chlo(module: ir.Module) -> bool:
    return "chlo." in module.operation.get_asm(print_generic_op_form=True)


def dots_as_dot_general(module: ir.Module) -> None:
    """Each stablehlo.dot becomes the dot_general it stands for (lhs's last dimension
    contracted with rhs's first): the interpreter aborts the process on stablehlo.dot
    ("unsupported at the moment")."""
    for op in ops_named(module, "stablehlo.dot"):
        lhs, rhs = op.operands
        numbers = stablehlo.DotDimensionNumbers.get([], [], [ir.RankedTensorType(lhs.type).rank - 1], [0])
        attributes = {"dot_dimension_numbers": numbers}
        if "precision_config" in op.attributes:
            attributes["precision_config"] = op.attributes["precision_config"]
        with ir.InsertionPoint(op):
            general = ir.Operation.create("stablehlo.dot_general", [op.results[0].type], [lhs, rhs], attributes, loc=op.location)
        op.results[0].replace_all_uses_with(general.results[0])
        op.erase()


def evaluate(data: bytes, source: str, entry: str, arguments: list[np.ndarray]) -> list[np.ndarray]:
    context = new_context()
    module = load_bytes(data, source, context).module
    with context, ir.Location.unknown():
        frontdoor.composites_to_calls(module)
        approx_top_k.expand_approx_top_k(module)
        frontdoor.inline_calls(module)
        shardings.import_shardings(module)
        forward_annotations(module)
        dots_as_dot_general(module)
        if has_chlo(module):
            text = jaxlib_bridge.legalize_chlo_text(module.operation.get_asm(print_generic_op_form=True), source)
            module = ir.Module.parse(text)
        execution = reference.execute(module, arguments, entry)
        return [literals.to_numpy(value) for value in execution.outputs]


def compare(actual: list[np.ndarray], expected: list[np.ndarray], rtol: float, atol: float) -> Comparison:
    if len(actual) != len(expected):
        return Comparison(False, f"{len(actual)} outputs, the reference has {len(expected)}")
    worst = 0.0
    for index, (a, e) in enumerate(zip(actual, expected)):
        if a.shape != e.shape or a.dtype != e.dtype:
            return Comparison(False, f"output {index} is {a.dtype}{list(a.shape)}, the reference's {e.dtype}{list(e.shape)}")
        if a.dtype.kind in "biu":
            if not np.array_equal(a, e):
                return Comparison(False, f"output {index} differs from the reference")
            continue
        a64, e64 = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64), e.astype(np.complex128 if e.dtype.kind == "c" else np.float64)
        if not np.allclose(a64, e64, rtol=rtol, atol=atol, equal_nan=True):
            return Comparison(False, f"output {index} differs: max abs diff {np.nanmax(np.abs(a64 - e64)):.3g}")
        if a.size:
            worst = max(worst, float(np.nanmax(np.abs(a64 - e64))) if np.isfinite(a64).any() else 0.0)
    return Comparison(True, f"{len(actual)} output(s) match (max abs diff {worst:.3g})")
