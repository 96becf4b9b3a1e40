"""Dots and convolutions of bf16, f16 or 8-bit floats accumulate in f32 and round once
(`transforms/narrow_dot_upcast.py`, as XLA:CPU computes them): each result is within one
rounding of the exact value, where accumulating in the narrow type was off by tens of its
units (an f16 dot of 512 terms: 0.88 off, where a rounding is 0.03), and an f8 dot ran on
the interpreter."""

import ml_dtypes
import numpy as np
import pytest

from mlirxla.runtime.client import Client, CompileOptions

DOT = """func.func @main(%a: tensor<32x512x{t}>, %b: tensor<512x16x{t}>) -> tensor<32x16x{t}> {{
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<32x512x{t}>, tensor<512x16x{t}>) -> tensor<32x16x{t}>
  return %0 : tensor<32x16x{t}>
}}"""

CONVOLUTION = """func.func @main(%x: tensor<2x10x10x64x{t}>, %w: tensor<3x3x64x8x{t}>) -> tensor<2x8x8x8x{t}> {{
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {{stride = [1, 1]}}
      {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}} : (tensor<2x10x10x64x{t}>, tensor<3x3x64x8x{t}>) -> tensor<2x8x8x8x{t}>
  return %0 : tensor<2x8x8x8x{t}>
}}"""

TYPES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}

F8_DOT = """func.func @main(%a: tensor<32x512xf8E4M3FN>, %b: tensor<512x16xf8E4M3FN>) -> tensor<32x16xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<32x512xf8E4M3FN>, tensor<512x16xf8E4M3FN>) -> tensor<32x16xf32>
  return %0 : tensor<32x16xf32>
}"""


def exact_convolution(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    out = np.zeros((x.shape[0], x.shape[1] - 2, x.shape[2] - 2, w.shape[3]))
    for dy in range(3):
        for dx in range(3):
            out += x[:, dy:dy + out.shape[1], dx:dx + out.shape[2], :] @ w[dy, dx]
    return out


def assert_within_one_rounding(result: np.ndarray, exact: np.ndarray, dtype) -> None:
    """|result - exact| is at most the spacing of `dtype` at the exact value (a half of it from
    the final rounding, the rest for the f32 sums' order)."""
    spacing = np.abs(np.nextafter(exact.astype(dtype), np.asarray(np.inf, dtype)).astype(np.float64) - exact.astype(dtype).astype(np.float64))
    assert np.all(np.abs(result.astype(np.float64) - exact) <= spacing), np.max(np.abs(result.astype(np.float64) - exact) / spacing)


@pytest.mark.parametrize("element", ["f16", "bf16"])
def test_a_half_precision_dot_is_an_f32_dot_rounded_once(element):
    dtype = TYPES[element]
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((32, 512)).astype(dtype), rng.standard_normal((512, 16)).astype(dtype)
    (result,) = Client().compile(DOT.format(t=element)).execute_numpy([a, b])
    assert result.dtype == dtype
    assert_within_one_rounding(result, a.astype(np.float64) @ b.astype(np.float64), dtype)


@pytest.mark.parametrize("element", ["f16", "bf16"])
def test_a_half_precision_convolution_is_an_f32_convolution_rounded_once(element):
    dtype = TYPES[element]
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((2, 10, 10, 64)).astype(dtype), rng.standard_normal((3, 3, 64, 8)).astype(dtype)
    (result,) = Client().compile(CONVOLUTION.format(t=element)).execute_numpy([x, w])
    assert result.dtype == dtype
    assert_within_one_rounding(result, exact_convolution(x.astype(np.float64), w.astype(np.float64)), dtype)


def test_an_f8_dot_with_an_f32_result_is_an_f32_gemm_of_widened_operands():
    """jax's `jnp.dot(a, b, preferred_element_type=f32)` of float8_e4m3fn: a GEMM on operands
    widened natively, no interpreter; numpy's f32 product of the same values."""
    rng = np.random.default_rng(8)
    a = rng.standard_normal((32, 512)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((512, 16)).astype(ml_dtypes.float8_e4m3fn)
    executable = Client().compile(F8_DOT)
    assert "gemm" in executable.thunk_sequence() and "interpret" not in executable.thunk_sequence(), executable.thunk_sequence()
    (result,) = executable.execute_numpy([a, b])
    np.testing.assert_allclose(result, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-5, atol=1e-4)


ROUNDED_THEN_DOT = """func.func @main(%x: tensor<64x256xf32>, %w: tensor<256x32xf32>) -> tensor<64x32xf32> {
  %xb = stablehlo.convert %x : (tensor<64x256xf32>) -> tensor<64x256xbf16>
  %wb = stablehlo.convert %w : (tensor<256x32xf32>) -> tensor<256x32xbf16>
  %0 = stablehlo.dot_general %xb, %wb, contracting_dims = [1] x [0] : (tensor<64x256xbf16>, tensor<256x32xbf16>) -> tensor<64x32xf32>
  return %0 : tensor<64x32xf32>
}"""


@pytest.mark.parametrize("excess_precision", [True, False])
def test_a_dot_of_values_rounded_to_bf16_multiplies_the_rounded_values(excess_precision):
    """`jnp.dot(x.astype(bf16), w.astype(bf16), preferred_element_type=f32)`: the operands are
    bf16 values, also where excess precision drops the roundings of values read again in a
    kernel (it handed the GEMM the f32 values: 2.4e-3 off, relative to the largest result)."""
    rng = np.random.default_rng(8)
    x, w = rng.standard_normal((64, 256)).astype(np.float32), rng.standard_normal((256, 32)).astype(np.float32)
    executable = Client().compile(ROUNDED_THEN_DOT, CompileOptions(allow_excess_precision=excess_precision))
    (result,) = executable.execute_numpy([x, w])
    exact = x.astype(ml_dtypes.bfloat16).astype(np.float64) @ w.astype(ml_dtypes.bfloat16).astype(np.float64)
    np.testing.assert_allclose(result, exact, rtol=1e-5, atol=1e-5 * np.abs(exact).max())
