"""Float sums over several dimensions (`backends/cpu/partial_sums.py`): each row adds into a
partial sum of its own, so that lane 0 of the vectorized row no longer carries the running
total of every earlier row. Sums whose exact value float32 represents, with partials that
are exact too, come out exact, as on XLA:CPU (500x500 of 500 had given 124992592)."""

import numpy as np
import pytest

from mlirxla.backends.cpu import partial_sums
from mlirxla.runtime.client import Client

SUM = """
func.func @main(%x: tensor<{shape}x{dtype}>) -> tensor<{dtype}> {{
  %zero = stablehlo.constant dense<{zero}> : tensor<{dtype}>
  %sum = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [{dimensions}]
    : (tensor<{shape}x{dtype}>, tensor<{dtype}>) -> tensor<{dtype}>
  return %sum : tensor<{dtype}>
}}
"""

SQUARES_PER_COLUMN_BLOCK = """
func.func @main(%x: tensor<64x40x8xf32>) -> tensor<8xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %squares = stablehlo.multiply %x, %x : tensor<64x40x8xf32>
  %sum = stablehlo.reduce(%squares init: %zero) applies stablehlo.add across dimensions = [0, 1]
    : (tensor<64x40x8xf32>, tensor<f32>) -> tensor<8xf32>
  return %sum : tensor<8xf32>
}
"""


def full_sum(shape, dtype="f32") -> str:
    zero = "0" if dtype.startswith("i") else "0.0"
    return SUM.format(shape="x".join(map(str, shape)), dtype=dtype, zero=zero,
                      dimensions=", ".join(map(str, range(len(shape)))))


@pytest.mark.parametrize("shape", [(500, 500), (100, 100, 100), (250, 4, 250)])
def test_sums_of_several_dimensions_are_exact_where_float32_can_be(shape):
    x = np.full(shape, 500, np.float32)
    (total,) = Client().compile(full_sum(shape)).execute_numpy([x])
    assert total == np.float32(500 * x.size)


def test_signed_zeros_infinities_and_nans_sum_as_before():
    x = np.full((40, 40), -0.0, np.float32)
    (total,) = Client().compile(full_sum(x.shape)).execute_numpy([x])
    assert total == 0 and not np.signbit(total)  # the init, +0, is among the addends
    x[7, 3] = np.inf
    executable = Client().compile(full_sum(x.shape))
    assert executable.execute_numpy([x])[0] == np.inf
    x[30, 0] = -np.inf
    assert np.isnan(executable.execute_numpy([x])[0])


def test_a_fused_sum_over_the_leading_dimensions_matches_numpy():
    x = np.random.default_rng(3).standard_normal((64, 40, 8)).astype(np.float32)
    (total,) = Client().compile(SQUARES_PER_COLUMN_BLOCK).execute_numpy([x])
    np.testing.assert_allclose(total, (x.astype(np.float64) ** 2).sum(axis=(0, 1)), rtol=1e-6)


def test_only_sums_over_rows_of_16_or_more_are_wrapped():
    counts = []
    wrap = partial_sums.add_rows_into_partial_sums

    def counting(module):
        counts.append(wrap(module))
        return counts[-1]

    partial_sums.add_rows_into_partial_sums = counting
    try:
        Client().compile(full_sum((500, 500)))
        Client().compile(full_sum((4000, 8)))
        Client().compile(full_sum((200, 200), "f64"))
        Client().compile(full_sum((30, 30), "i32"))
    finally:
        partial_sums.add_rows_into_partial_sums = wrap
    assert counts == [1, 0, 1, 0]
