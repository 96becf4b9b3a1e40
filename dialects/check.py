"""The `check` dialect of the StableHLO interpreter tests, defined here because neither the
toolkit nor jaxlib carries it.

Each op states an expectation about a value; `mlirxla-run` evaluates the module and then
judges every check (exit status 1 when one fails). The tests write these ops in a custom
syntax; `mlirxla.frontdoor.check_syntax` rewrites that syntax to the generic form below.
"""

from collections.abc import Sequence
from typing import Any

from mlirxla.mlir import ext, ir


class Check(ext.Dialect, name="check"):
    """Expectations about values, judged after execution."""


class ExpectEqOp(Check.Operation, name="expect_eq"):
    """`"check.expect_eq"(%actual, %expected)`: bitwise equal."""

    actual: ext.Operand[Any]
    expected: ext.Operand[Any]


class ExpectEqConstOp(Check.Operation, name="expect_eq_const"):
    """`"check.expect_eq_const"(%actual) {value = dense<...>}`: bitwise equal to a constant."""

    actual: ext.Operand[Any]
    value: Any


class ExpectAlmostEqOp(Check.Operation, name="expect_almost_eq"):
    """Equal within `tolerance` (absolute or relative, default 1e-4)."""

    actual: ext.Operand[Any]
    expected: ext.Operand[Any]


class ExpectAlmostEqConstOp(Check.Operation, name="expect_almost_eq_const"):
    """Equal to a constant within `tolerance` (default 1e-4)."""

    actual: ext.Operand[Any]
    value: Any


class ExpectCloseOp(Check.Operation, name="expect_close"):
    """Within [`min_ulp_difference`, `max_ulp_difference`] units in the last place."""

    actual: ext.Operand[Any]
    expected: ext.Operand[Any]


class ExpectSerializedEqOp(Check.Operation, name="expect_serialized_eq"):
    """Equal to the value a probe serialized under `probe_id` (needs the probe files)."""

    actual: ext.Operand[Any]
    probe_id: Any


CHECK_OPS: Sequence[type] = (
    ExpectEqOp,
    ExpectEqConstOp,
    ExpectAlmostEqOp,
    ExpectAlmostEqConstOp,
    ExpectCloseOp,
    ExpectSerializedEqOp,
)

DEFAULT_TOLERANCE = 1e-4


def is_check(op: ir.Operation) -> bool:
    return op.name.startswith("check.")
