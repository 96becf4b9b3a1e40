"""Conversions between f32 and float8_e4m3fn / float8_e5m2 run natively, as integer
arithmetic (`backends/cpu/float8_conversions.py`), with ml_dtypes' bits (which XLA:CPU's
are): every 8-bit pattern widened, and narrowed from every representable value, every
midpoint between neighbours and the f32 values either side of it, the overflow and
underflow boundaries, infinities, NaNs of both signs and f32 subnormals. Arithmetic on f8
values rounds after each op, as the op's type says."""

import ml_dtypes
import numpy as np
import pytest

from mlirxla.runtime.client import Client

TYPES = {"f8E4M3FN": ml_dtypes.float8_e4m3fn, "f8E5M2": ml_dtypes.float8_e5m2}


def convert_text(source: str, result: str, n: int) -> str:
    return f"""func.func @main(%x: tensor<{n}x{source}>) -> tensor<{n}x{result}> {{
  %0 = stablehlo.convert %x : (tensor<{n}x{source}>) -> tensor<{n}x{result}>
  return %0 : tensor<{n}x{result}>
}}"""


def native(text: str):
    executable = Client().compile(text)
    assert "interpret" not in executable.thunk_sequence(), executable.thunk_sequence()
    return executable


def boundary_values(dtype) -> np.ndarray:
    """Every finite value of `dtype`, the midpoints between neighbours and the f32 values next
    to them, and f32's specials and extremes."""
    finite = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float32)
    finite = np.unique(finite[np.isfinite(finite)])
    midpoints = ((finite[:-1].astype(np.float64) + finite[1:]) / 2).astype(np.float32)
    above, below = np.nextafter(midpoints, np.float32(np.inf)), np.nextafter(midpoints, np.float32(-np.inf))
    largest = float(finite.max())
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 3e38, -3e38,
                         largest * 1.03, largest * 1.07, largest * 1.2], np.float32)
    rng = np.random.default_rng(9)
    spread = rng.standard_normal(4096).astype(np.float32) * np.float32(2.0) ** rng.integers(-20, 16, 4096).astype(np.float32)
    return np.concatenate([finite, midpoints, above, below, specials, spread])


@pytest.mark.parametrize("element", list(TYPES))
def test_every_f8_value_widens_to_ml_dtypes_f32(element):
    dtype = TYPES[element]
    every = np.arange(256, dtype=np.uint8).view(dtype)
    (widened,) = native(convert_text(element, "f32", 256)).execute_numpy([every])
    np.testing.assert_array_equal(widened.view(np.uint32), every.astype(np.float32).view(np.uint32))


@pytest.mark.parametrize("element", list(TYPES))
def test_f32_narrows_to_ml_dtypes_bits_to_nearest_even(element):
    dtype = TYPES[element]
    values = boundary_values(dtype)
    (narrowed,) = native(convert_text("f32", element, values.size)).execute_numpy([values])
    np.testing.assert_array_equal(narrowed.view(np.uint8), values.astype(dtype).view(np.uint8))


ARITHMETIC = """func.func @main(%a: tensor<256x{t}>, %b: tensor<256x{t}>) -> tensor<256x{t}> {{
  %0 = stablehlo.multiply %a, %b : tensor<256x{t}>
  %1 = stablehlo.add %0, %a : tensor<256x{t}>
  return %1 : tensor<256x{t}>
}}"""


@pytest.mark.parametrize("element", list(TYPES))
def test_f8_arithmetic_rounds_after_each_op(element):
    dtype = TYPES[element]
    rng = np.random.default_rng(10)
    a, b = (rng.standard_normal(256).astype(dtype) for _ in range(2))
    (result,) = native(ARITHMETIC.format(t=element)).execute_numpy([a, b])
    product = (a.astype(np.float32) * b.astype(np.float32)).astype(dtype)
    np.testing.assert_array_equal(result.view(np.uint8), (product.astype(np.float32) + a.astype(np.float32)).astype(dtype).view(np.uint8))
