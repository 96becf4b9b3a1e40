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


TRIDIAGONAL_SOLVE = """func.func @main(%dl: tensor<2x6xf64>, %d: tensor<2x6xf64>, %du: tensor<2x6xf64>, %b: tensor<2x6x3xf64>) -> tensor<2x6x3xf64> {
  %x = stablehlo.custom_call @mlirxla.tridiagonal_solve(%dl, %d, %du, %b) {api_version = 1 : i32, backend_config = "{\\"perturb_singular\\": PERTURB}"}
      : (tensor<2x6xf64>, tensor<2x6xf64>, tensor<2x6xf64>, tensor<2x6x3xf64>) -> tensor<2x6x3xf64>
  return %x : tensor<2x6x3xf64>
}
"""


def tridiagonal_system(singular: bool):
    rng = np.random.default_rng(1)
    dl, d, du = (rng.standard_normal((2, 6)) for _ in range(3))
    dl[:, 0] = du[:, -1] = 0
    d[:, 0] = 1e-3  # the first column's pivot is the row below: row exchanges
    if singular:
        dl[1, 2] = d[1, 2] = du[1, 2] = 0
    return dl, d, du, rng.standard_normal((2, 6, 3))


def dense(dl, d, du):
    return np.diag(d) + np.diag(dl[1:], -1) + np.diag(du[:-1], 1)


@pytest.mark.parametrize("perturb", [False, True])
def test_tridiagonal_solves_match_dense_solves(perturb):
    dl, d, du, b = tridiagonal_system(singular=False)
    x = Client().compile(TRIDIAGONAL_SOLVE.replace("PERTURB", str(perturb).lower())).execute_numpy([dl, d, du, b])[0]
    for i in range(2):
        np.testing.assert_allclose(x[i], np.linalg.solve(dense(dl[i], d[i], du[i]), b[i]), rtol=1e-10, atol=1e-12)


def test_a_singular_tridiagonal_system_gives_nans_or_perturbed_finite_values():
    """jax's cpu forms: gtsv's failure as NaNs; with perturbation, finite values of which the
    nonsingular system's rows still hold (inverse iteration's large vectors)."""
    dl, d, du, b = tridiagonal_system(singular=True)
    pivoted, perturbed = (Client().compile(TRIDIAGONAL_SOLVE.replace("PERTURB", flag)).execute_numpy([dl, d, du, b])[0]
                          for flag in ("false", "true"))
    assert np.isnan(pivoted[1]).all() and np.isfinite(pivoted[0]).all()
    np.testing.assert_allclose(pivoted[0], perturbed[0], rtol=1e-12)
    assert np.isfinite(perturbed[1]).all() and np.abs(perturbed[1]).max() > 1e10
