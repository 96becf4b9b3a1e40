"""bf16 reductions and scatters accumulate in f32 (`transforms/bf16_accumulation_in_f32.py`,
XLA:CPU's float normalization): a column sum of 512 bf16 values, a cumulative sum
(reduce_window), a scatter-add with repeated indices and a max pool's gradient
(select_and_scatter) are the exact sums rounded to bf16 once, within one bf16 ulp; rounding
the accumulator after every element (the StableHLO reference's bf16 arithmetic) is off by
several."""

import ml_dtypes
import numpy as np
import pytest

from mlirxla.runtime.client import Client

BF16 = ml_dtypes.bfloat16

COLUMN_SUM = """func.func @main(%x: tensor<512x256xbf16>) -> tensor<256xbf16> {
  %zero = stablehlo.constant dense<0.0> : tensor<bf16>
  %0 = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<512x256xbf16>, tensor<bf16>) -> tensor<256xbf16>
  return %0 : tensor<256xbf16>
}"""

# jax's cumsum along the rows: a window of the whole row, padded in front
CUMULATIVE_SUM = """func.func @main(%x: tensor<4x512xbf16>) -> tensor<4x512xbf16> {
  %zero = stablehlo.constant dense<0.0> : tensor<bf16>
  %0 = "stablehlo.reduce_window"(%x, %zero) ({
    ^bb0(%a: tensor<bf16>, %b: tensor<bf16>):
      %s = stablehlo.add %a, %b : tensor<bf16>
      stablehlo.return %s : tensor<bf16>
  }) {window_dimensions = array<i64: 1, 512>, padding = dense<[[0, 0], [511, 0]]> : tensor<2x2xi64>} : (tensor<4x512xbf16>, tensor<bf16>) -> tensor<4x512xbf16>
  return %0 : tensor<4x512xbf16>
}"""

# an embedding's gradient: 2048 rows added into 16, the update scaled by a constant in the
# update computation
SCATTER_ADD = """func.func @main(%table: tensor<16x8xbf16>, %rows: tensor<2048x1xi32>, %updates: tensor<2048x8xbf16>) -> tensor<16x8xbf16> {
  %0 = "stablehlo.scatter"(%table, %rows, %updates) ({
    ^bb0(%a: tensor<bf16>, %b: tensor<bf16>):
      %half = stablehlo.constant dense<0.5> : tensor<bf16>
      %h = stablehlo.multiply %b, %half : tensor<bf16>
      %s = stablehlo.add %a, %h : tensor<bf16>
      stablehlo.return %s : tensor<bf16>
  }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>} : (tensor<16x8xbf16>, tensor<2048x1xi32>, tensor<2048x8xbf16>) -> tensor<16x8xbf16>
  return %0 : tensor<16x8xbf16>
}"""

# a 2x2 max pool's gradient with overlapping 3x3 windows at stride 1 on a 16x16 image
POOL_GRADIENT = """func.func @main(%x: tensor<16x16xbf16>, %g: tensor<14x14xbf16>) -> tensor<16x16xbf16> {
  %zero = stablehlo.constant dense<0.0> : tensor<bf16>
  %0 = "stablehlo.select_and_scatter"(%x, %g, %zero) ({
    ^bb0(%a: tensor<bf16>, %b: tensor<bf16>):
      %ge = stablehlo.compare GE, %a, %b : (tensor<bf16>, tensor<bf16>) -> tensor<i1>
      stablehlo.return %ge : tensor<i1>
  }, {
    ^bb0(%a: tensor<bf16>, %b: tensor<bf16>):
      %s = stablehlo.add %a, %b : tensor<bf16>
      stablehlo.return %s : tensor<bf16>
  }) {window_dimensions = array<i64: 3, 3>, window_strides = array<i64: 1, 1>} : (tensor<16x16xbf16>, tensor<14x14xbf16>, tensor<bf16>) -> tensor<16x16xbf16>
  return %0 : tensor<16x16xbf16>
}"""


def within_one_ulp(result: np.ndarray, exact: np.ndarray) -> None:
    """`result` (bf16) within one bf16 ulp of `exact` (f64): 2^-7 of its magnitude's power of two."""
    ulp = np.exp2(np.floor(np.log2(np.maximum(np.abs(exact), 1e-30))) - 7)
    np.testing.assert_array_less(np.abs(result.astype(np.float64) - exact), ulp + 1e-30)


def test_a_column_sum_rounds_once():
    x = np.random.default_rng(1).standard_normal((512, 256)).astype(BF16)
    within_one_ulp(Client().compile(COLUMN_SUM).execute_numpy([x])[0], x.astype(np.float64).sum(axis=0))


def test_a_cumulative_sum_rounds_once():
    x = np.random.default_rng(2).uniform(0, 1, (4, 512)).astype(BF16)
    within_one_ulp(Client().compile(CUMULATIVE_SUM).execute_numpy([x])[0], np.cumsum(x.astype(np.float64), axis=1))


def test_a_scatter_add_rounds_once():
    rng = np.random.default_rng(3)
    table = rng.standard_normal((16, 8)).astype(BF16)
    rows = rng.integers(0, 16, (2048, 1)).astype(np.int32)
    updates = rng.uniform(0, 1, (2048, 8)).astype(BF16)
    exact = table.astype(np.float64)
    np.add.at(exact, rows[:, 0], updates.astype(np.float64) * 0.5)
    within_one_ulp(Client().compile(SCATTER_ADD).execute_numpy([table, rows, updates])[0], exact)


def test_a_max_pool_gradient_rounds_once():
    rng = np.random.default_rng(4)
    x = rng.permutation(256).reshape(16, 16).astype(BF16)  # distinct values: one maximum a window
    g = rng.uniform(0, 1, (14, 14)).astype(BF16)
    exact = np.zeros((16, 16))
    for i in range(14):
        for j in range(14):
            window = x[i:i + 3, j:j + 3].astype(np.float64)
            k = np.argmax(window)
            exact[i + k // 3, j + k % 3] += float(g[i, j])
    result = Client().compile(POOL_GRADIENT).execute_numpy([x, g])[0]
    within_one_ulp(result, exact)
    assert (result.astype(np.float64) == 0).sum() == (exact == 0).sum()
