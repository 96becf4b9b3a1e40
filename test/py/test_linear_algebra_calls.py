"""XLA's QR custom calls (jax's generic QR lowering): `Qr` gives LAPACK's geqrf form and
`ProductOfElementaryHouseholderReflectors` the orthonormal factor from it."""

import numpy as np
import pytest

from mlirxla.errors import MlirxlaError
from mlirxla.runtime.client import Client

QR = """func.func @main(%a: tensor<2x5x3xf32>) -> (tensor<2x5x3xf32>, tensor<2x3x3xf32>) {
  %0:2 = stablehlo.custom_call @Qr(%a) {api_version = 1 : i32} : (tensor<2x5x3xf32>) -> (tensor<2x5x3xf32>, tensor<2x3xf32>)
  %q = stablehlo.custom_call @ProductOfElementaryHouseholderReflectors(%0#0, %0#1) {api_version = 1 : i32}
      : (tensor<2x5x3xf32>, tensor<2x3xf32>) -> tensor<2x5x3xf32>
  %r = stablehlo.slice %0#0 [0:2, 0:3, 0:3] : (tensor<2x5x3xf32>) -> tensor<2x3x3xf32>
  return %q, %r : tensor<2x5x3xf32>, tensor<2x3x3xf32>
}
"""


def test_qr_custom_calls_factor_a_batch():
    a = np.random.default_rng(0).standard_normal((2, 5, 3)).astype(np.float32)
    executable = Client().compile(QR)
    assert "host householder_qr" in executable.thunk_sequence() and "host householder_product" in executable.thunk_sequence()
    q, upper = executable.execute_numpy([a])
    r = np.triu(upper)
    np.testing.assert_allclose(q @ r, a, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(3), (2, 3, 3)), atol=1e-5)
    np.testing.assert_allclose(np.abs(r), np.abs(np.linalg.qr(a)[1]), rtol=1e-4, atol=1e-5)


def test_an_element_type_lapack_lacks_is_refused_at_compile_time():
    """jax's QR of f16 on a non-cpu platform expects an error saying "Unsupported dtype"."""
    f16_qr = QR.replace("f32", "f16")
    with pytest.raises(MlirxlaError, match=r"Unsupported dtype f16 for custom_call @Qr") as caught:
        Client().compile(f16_qr)
    assert caught.value.location == "<text>:2:10"
