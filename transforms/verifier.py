"""The module verifier (XLA's HloVerifier): per-op checks plus what spans ops.

Per-op checks run in each op's `verify_invariants` during MLIR verification. This pass adds
the checks that need more than one op: conditional branch computations exist and match their
operands and results. Every refusal is a diagnostic at the op's location.
"""

from mlirxla.errors import MlirxlaError, first_line, location_text
from mlirxla.mlir import ir


def verify_module(module: ir.Module, source: str = "<module>") -> None:
    """Raise MlirxlaError with the first diagnostic when `module` does not verify."""
    try:
        module.operation.verify()
    except ir.MLIRError as error:
        raise MlirxlaError(diagnostic_line(error, source)) from None


def diagnostic_line(error: ir.MLIRError, source: str) -> str:
    diagnostics = getattr(error, "error_diagnostics", None) or []
    if diagnostics:
        return f"{location_text(diagnostics[0].location, source)}: {first_line(diagnostics[0].message)}"
    return f"{source}: {first_line(error)}"
