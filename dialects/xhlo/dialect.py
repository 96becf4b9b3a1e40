"""The `xhlo` dialect object and the base class its ops share.

Every xhlo op verifies through `XhloOp.verify_invariants`, which runs the op's own `check`
(shape and element-type inference, region signatures) and the checks every op shares (the
optional `result_layouts` attribute holds one minor-to-major permutation per tensor result).
A check returns None when the op is fine or a sentence saying what is wrong; the sentence
becomes a diagnostic at the op's location. The toolkit demands that `verify_invariants`
return a bool (None or an exception gives std::bad_cast), so nothing escapes from here.

Within `verifying(scope)` (one module verification, `transforms/verifier.verify_module`) each
op verified also hands the scope what the module-level checks need, so that they need no walk
of their own: the ops named one of `scope.names` or carrying a sharding (`scope.noted`); and
the result-layout check's answers are kept per (layouts, result types) for the scope's
duration (the attributes and types of one context are uniqued, so equal keys are the same
question; many ops share one layout). Nothing is kept past the scope.
"""

import contextlib
from dataclasses import dataclass, field

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
        scope = _scope
        try:
            with self.location:
                operation = self.operation
                sharded = SHARDING in operation.attributes
                problem = self.check() or check_result_layouts(operation, scope) or (check_sharding(operation) if sharded else None)
                if scope is not None and (sharded or self.OPERATION_NAME in scope.names):
                    scope.note(operation)
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


def check_result_layouts(op: ir.Operation, scope: "VerificationScope | None" = None) -> str | None:
    if RESULT_LAYOUTS not in op.attributes:
        return None
    layouts = op.attributes[RESULT_LAYOUTS]
    types = tuple(result.type for result in op.results)
    if scope is None:
        return result_layouts_problem(layouts, types)
    key = (layouts, types)
    if key not in scope.layout_problems:
        scope.layout_problems[key] = result_layouts_problem(layouts, types)
    return scope.layout_problems[key]


def result_layouts_problem(layouts: ir.Attribute, types: tuple[ir.Type, ...]) -> str | None:
    layouts = ir.ArrayAttr(layouts)
    if len(layouts) != len(types):
        return f"{len(layouts)} result layouts for {len(types)} results"
    for index, (layout, value_type) in enumerate(zip(layouts, types)):
        if isinstance(layout, ir.UnitAttr):
            continue
        if problem := check_layout(layout, value_type, f"result #{index}"):
            return problem
    return None


def check_sharding(op: ir.Operation) -> str | None:
    if SHARDING not in op.attributes:
        return None
    from .sharding import sharding_problem

    return sharding_problem(op.attributes[SHARDING], len(op.results))


@dataclass
class VerificationScope:
    """What one module's verification gathers from its ops' `verify_invariants` (see the
    module's docstring): the ops of `context` the module-level checks look at, in the order
    they were verified, and the result-layout answers."""

    context: ir.Context
    names: frozenset[str]  # ops the module-level checks look at whatever their attributes
    noted: list[ir.Operation] = field(default_factory=list)
    layout_problems: dict = field(default_factory=dict)

    def note(self, operation: ir.Operation) -> None:
        if operation.context is self.context:  # not an op of another context verified meanwhile
            self.noted.append(operation)


_scope: VerificationScope | None = None


@contextlib.contextmanager
def verifying(scope: VerificationScope):
    """`scope` gathers from every xhlo op verified within the with-block (on any thread: MLIR's
    verifier checks functions in parallel)."""
    global _scope
    outer, _scope = _scope, scope
    try:
        yield scope
    finally:
        _scope = outer
