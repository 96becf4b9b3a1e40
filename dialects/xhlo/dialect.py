"""The `xhlo` dialect object and the base class its ops share.

Every xhlo op verifies through `XhloOp.verify_invariants`, which runs the op's own `check`
(shape and element-type inference, region signatures) and the checks every op shares (the
optional `result_layouts` attribute holds one minor-to-major permutation per tensor result).
A check returns None when the op is fine or a sentence saying what is wrong; the sentence
becomes a diagnostic at the op's location. The toolkit demands that `verify_invariants`
return a bool (None or an exception gives std::bad_cast), so nothing escapes from here.
"""

from mlirxla.mlir import ext, ir

from .types import ints, is_tensor, tensor

RESULT_LAYOUTS = "result_layouts"
SHARDING = "xhlo.sharding"


class Xhlo(ext.Dialect, name="xhlo"):
    """XLA's HLO instruction set as an MLIR dialect."""


class XhloOp(Xhlo.Operation):
    """Base of all xhlo ops: shared verification."""

    def check(self) -> str | None:
        return None

    def verify_invariants(self) -> bool:
        try:
            with self.location:
                problem = self.check() or check_result_layouts(self.operation) or check_sharding(self.operation)
        except Exception as error:  # a verifier bug must not abort the process
            problem = f"verifier failed: {type(error).__name__}: {error}"
        if problem is None:
            return True
        self.location.emit_error(f"{self.operation.name}: {problem}")
        return False


def is_permutation(values: list[int], rank: int) -> bool:
    return sorted(values) == list(range(rank))


def check_layout(layout: ir.Attribute, value_type: ir.Type, what: str) -> str | None:
    """A layout is a minor-to-major permutation of the dimensions of a tensor."""
    if not is_tensor(value_type):
        return f"{what} has a layout but is not a ranked tensor ({value_type})"
    minor_to_major = ints(layout)
    rank = tensor(value_type).rank
    if not is_permutation(minor_to_major, rank):
        return f"{what} layout {minor_to_major} is not a permutation of the {rank} dimensions of {value_type}"
    return None


def check_result_layouts(op: ir.Operation) -> str | None:
    if RESULT_LAYOUTS not in op.attributes:
        return None
    layouts = ir.ArrayAttr(op.attributes[RESULT_LAYOUTS])
    if len(layouts) != len(op.results):
        return f"{len(layouts)} result layouts for {len(op.results)} results"
    for index, (layout, result) in enumerate(zip(layouts, op.results)):
        if isinstance(layout, ir.UnitAttr):
            continue
        if problem := check_layout(layout, result.type, f"result #{index}"):
            return problem
    return None


def check_sharding(op: ir.Operation) -> str | None:
    if SHARDING not in op.attributes:
        return None
    from .sharding import sharding_problem

    return sharding_problem(op.attributes[SHARDING], len(op.results))
