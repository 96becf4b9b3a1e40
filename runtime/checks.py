"""Judge the `check` ops of an execution, as the StableHLO interpreter's check dialect does.

expect_eq / expect_eq_const: bitwise equal. expect_almost_eq / expect_almost_eq_const: every
element within `tolerance` (default 1e-4) of the expected one, nan matching nan.
expect_close: the distance in units in the last place lies in [min_ulp_difference,
max_ulp_difference] (defaults 0 and 3). expect_serialized_eq needs the probe files the
interpreter writes and is reported as not judged.
"""

from dataclasses import dataclass

import numpy as np

from mlirxla.dialects.check import DEFAULT_TOLERANCE
from mlirxla.mlir import ir

from . import literals
from .reference import CheckRecord, Execution


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check: passed, failed (with what differed) or not judged."""

    check: CheckRecord
    passed: bool
    detail: str = ""
    judged: bool = True


MAX_ULP_DIFFERENCE = 2**64 - 1  # what ulp bounds are counted in: unsigned 64-bit


def attribute_float(attributes: dict, name: str, default: float) -> float:
    if name not in attributes:
        return default
    attr = attributes[name]
    if isinstance(attr, ir.FloatAttr):
        return ir.FloatAttr(attr).value
    value = ir.IntegerAttr(attr).value
    return float(value % 2**64) if name.endswith("ulp_difference") else float(value)


def almost_equal(actual: np.ndarray, expected: np.ndarray, tolerance: float) -> tuple[bool, str]:
    a = np.asarray(actual).astype(np.complex128 if np.iscomplexobj(actual) else np.float64)
    e = np.asarray(expected).astype(a.dtype)
    both_nan = np.isnan(a) & np.isnan(e)
    close = (a == e) | both_nan | (np.abs(a - e) <= tolerance)
    if close.all():
        return True, ""
    index = np.unravel_index(np.argmin(close), close.shape) if close.shape else ()
    return False, f"element {list(index)}: {a[index]} vs expected {e[index]} (tolerance {tolerance})"


def ulp_distance(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """ULP distance between floats of one dtype, through their ordered integer bit patterns:
    0 where both are NaN (whatever their payloads); complex numbers by their worse part."""
    if actual.dtype.kind == "c":
        expected = np.asarray(expected).astype(actual.dtype)
        return np.maximum(ulp_distance(actual.real.copy(), expected.real.copy()), ulp_distance(actual.imag.copy(), expected.imag.copy()))
    expected = np.asarray(expected).astype(actual.dtype)
    bits = np.dtype(f"i{actual.dtype.itemsize}")

    def ordered(x):
        raw = x.view(bits).astype(np.int64)
        sign_mask = np.int64(1) << (actual.dtype.itemsize * 8 - 1)
        return np.where(raw < 0, -(raw & (sign_mask - 1)), raw)

    distance = np.abs(ordered(actual).astype(object) - ordered(expected).astype(object)).astype(np.float64)
    both_nan = np.isnan(actual) & np.isnan(expected)
    # the spec: a non-finite value is infinitely many ulps from anything it does not equal
    apart = (actual != expected) & ~both_nan & ~(np.isfinite(actual) & np.isfinite(expected))
    return np.where(both_nan, 0.0, np.where(apart, float(MAX_ULP_DIFFERENCE), distance))


def judge_one(check: CheckRecord, values: list[ir.Attribute]) -> Verdict:
    kind = check.name.removeprefix("check.")
    attributes = check.attributes
    if kind == "expect_serialized_eq":
        return Verdict(check, False, "needs the interpreter's probe files", judged=False)
    actual = values[0]
    expected = attributes["value"] if kind.endswith("_const") else values[1]
    if kind in ("expect_eq", "expect_eq_const"):
        if actual == expected:
            return Verdict(check, True)
        return Verdict(check, False, f"got {actual}, expected {expected}")
    actual_array, expected_array = literals.to_numpy(actual), literals.to_numpy(expected)
    if kind in ("expect_almost_eq", "expect_almost_eq_const"):
        passed, detail = almost_equal(actual_array, expected_array, attribute_float(attributes, "tolerance", DEFAULT_TOLERANCE))
        return Verdict(check, passed, detail)
    if kind == "expect_close":
        low = attribute_float(attributes, "min_ulp_difference", 0)
        high = attribute_float(attributes, "max_ulp_difference", 3)
        distance = ulp_distance(actual_array, expected_array)
        passed = bool(((distance >= low) & (distance <= high)).all())
        return Verdict(check, passed, "" if passed else f"ULP distance {distance.max()} outside [{low}, {high}]")
    return Verdict(check, False, f"unknown check '{check.name}'", judged=False)


def judge(execution: Execution) -> list[Verdict]:
    return [judge_one(check, execution.checked_values(check)) for check in execution.checks]
