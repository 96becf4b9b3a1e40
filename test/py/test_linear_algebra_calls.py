"""Linear-algebra custom calls, written as jax emits them: XLA's QR calls (jax's generic QR
lowering: `Qr` gives LAPACK's geqrf form and `ProductOfElementaryHouseholderReflectors` the
orthonormal factor from it), and jax's cpu LAPACK calls (`lapack_<t><routine>_ffi`, their
attributes in `mhlo.backend_config`, column-major layouts, `info` results), checked against
numpy; `test_lapack_custom_calls.py` compares every target with jax's cpu backend."""

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


TRIDIAGONAL_SOLVE = """func.func @main(%dl: tensor<2x6xf64>, %d: tensor<2x6xf64>, %du: tensor<2x6xf64>, %b: tensor<2x6x3xf64>)
    -> (tensor<2x6x3xf64>, tensor<2xi32>, tensor<2x6x3xf64>) {
  %0:5 = stablehlo.custom_call @lapack_dgtsv_ffi(%dl, %d, %du, %b) {mhlo.backend_config = {}, api_version = 4 : i32,
      operand_layouts = [dense<[1, 0]> : tensor<2xindex>, dense<[1, 0]> : tensor<2xindex>, dense<[1, 0]> : tensor<2xindex>,
                         dense<[1, 2, 0]> : tensor<3xindex>],
      result_layouts = [dense<[1, 0]> : tensor<2xindex>, dense<[1, 0]> : tensor<2xindex>, dense<[1, 0]> : tensor<2xindex>,
                        dense<[1, 2, 0]> : tensor<3xindex>, dense<0> : tensor<1xindex>]}
      : (tensor<2x6xf64>, tensor<2x6xf64>, tensor<2x6xf64>, tensor<2x6x3xf64>)
      -> (tensor<2x6xf64>, tensor<2x6xf64>, tensor<2x6xf64>, tensor<2x6x3xf64>, tensor<2xi32>)
  %1 = stablehlo.custom_call @tridiagonal_solve_perturbed_ffi(%dl, %d, %du, %b) {mhlo.backend_config = {}, api_version = 4 : i32}
      : (tensor<2x6xf64>, tensor<2x6xf64>, tensor<2x6xf64>, tensor<2x6x3xf64>) -> tensor<2x6x3xf64>
  return %0#3, %0#4, %1 : tensor<2x6x3xf64>, tensor<2xi32>, tensor<2x6x3xf64>
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


def test_tridiagonal_solves_match_dense_solves():
    dl, d, du, b = tridiagonal_system(singular=False)
    pivoted, info, perturbed = Client().compile(TRIDIAGONAL_SOLVE).execute_numpy([dl, d, du, b])
    assert list(info) == [0, 0]
    for i in range(2):
        expected = np.linalg.solve(dense(dl[i], d[i], du[i]), b[i])
        np.testing.assert_allclose(pivoted[i], expected, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(perturbed[i], expected, rtol=1e-10, atol=1e-12)


def test_a_singular_tridiagonal_system_gives_info_or_perturbed_finite_values():
    """jaxlib's forms: gtsv's `info` names the zero pivot (jax's lowering makes NaNs of it);
    with perturbation, finite values of which the nonsingular system's rows still hold
    (inverse iteration's large vectors)."""
    dl, d, du, b = tridiagonal_system(singular=True)
    pivoted, info, perturbed = Client().compile(TRIDIAGONAL_SOLVE).execute_numpy([dl, d, du, b])
    assert info[0] == 0 and info[1] > 0
    np.testing.assert_allclose(pivoted[0], perturbed[0], rtol=1e-12)
    assert np.isfinite(perturbed[1]).all() and np.abs(perturbed[1]).max() > 1e10


EIGH = """func.func @main(%a: tensor<3x4x4xf32>) -> (tensor<3x4x4xf32>, tensor<3x4xf32>, tensor<3xi32>) {
  %0:3 = stablehlo.custom_call @lapack_ssyevd_ffi(%a) {mhlo.backend_config = {mode = 86 : ui8, uplo = 76 : ui8},
      api_version = 4 : i32, operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>],
      output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>],
      result_layouts = [dense<[1, 2, 0]> : tensor<3xindex>, dense<[1, 0]> : tensor<2xindex>, dense<0> : tensor<1xindex>]}
      : (tensor<3x4x4xf32>) -> (tensor<3x4x4xf32>, tensor<3x4xf32>, tensor<3xi32>)
  return %0#0, %0#1, %0#2 : tensor<3x4x4xf32>, tensor<3x4xf32>, tensor<3xi32>
}
"""


def test_symmetric_eigendecomposition_reads_the_lower_triangle_of_each_matrix():
    a = np.random.default_rng(2).standard_normal((3, 4, 4)).astype(np.float32)
    executable = Client().compile(EIGH)
    assert "host lapack_ffi" in executable.thunk_sequence()
    vectors, values, info = executable.execute_numpy([a])
    symmetric = np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2)  # syevd reads uplo = L only
    assert list(info) == [0, 0, 0]
    np.testing.assert_allclose(values, np.linalg.eigvalsh(symmetric), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(symmetric @ vectors, vectors * values[:, None, :], rtol=1e-4, atol=1e-4)


GETRF = """func.func @main(%a: tensor<2x3x4xf64>) -> (tensor<2x3x4xf64>, tensor<2x3xi32>, tensor<2xi32>) {
  %0:3 = stablehlo.custom_call @lapack_dgetrf_ffi(%a) {mhlo.backend_config = {}, api_version = 4 : i32,
      operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>],
      result_layouts = [dense<[1, 2, 0]> : tensor<3xindex>, dense<[1, 0]> : tensor<2xindex>, dense<0> : tensor<1xindex>]}
      : (tensor<2x3x4xf64>) -> (tensor<2x3x4xf64>, tensor<2x3xi32>, tensor<2xi32>)
  return %0#0, %0#1, %0#2 : tensor<2x3x4xf64>, tensor<2x3xi32>, tensor<2xi32>
}
"""


def test_lu_factorization_gives_lapack_one_based_row_exchanges():
    a = np.random.default_rng(3).standard_normal((2, 3, 4))
    lu, pivots, info = Client().compile(GETRF).execute_numpy([a])
    assert list(info) == [0, 0] and pivots.min() >= 1 and pivots.max() <= 3
    for i in range(2):
        rows = a[i].copy()
        for k, pivot in enumerate(pivots[i] - 1):
            rows[[k, pivot]] = rows[[pivot, k]]
        lower = np.tril(lu[i], -1)[:, :3] + np.eye(3)
        np.testing.assert_allclose(lower @ np.triu(lu[i]), rows, rtol=1e-12, atol=1e-12)


TRSM = """func.func @main(%a: tensor<3x4x4xf32>, %b: tensor<3x4x5xf32>) -> tensor<3x4x5xf32> {
  %x = stablehlo.custom_call @lapack_strsm_ffi(%a, %b) {mhlo.backend_config = {diag = 78 : ui8, side = 76 : ui8, trans_x = 78 : ui8, uplo = 85 : ui8},
      api_version = 4 : i32, operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>, dense<[1, 2, 0]> : tensor<3xindex>],
      output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 1, operand_tuple_indices = []>],
      result_layouts = [dense<[1, 2, 0]> : tensor<3xindex>]} : (tensor<3x4x4xf32>, tensor<3x4x5xf32>) -> tensor<3x4x5xf32>
  return %x : tensor<3x4x5xf32>
}
"""


def test_a_lapack_call_solves_in_the_buffer_of_the_operand_it_overwrites():
    """jax's trsm aliases its result to the right-hand sides (`output_operand_aliases`): the
    transposed copy of b it is given is a temp nothing else reads, so buffer assignment puts
    the solution in it (XLA's in-place pair) and the call moves no bytes first; the solves
    are numpy's."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 4, 4)).astype(np.float32) + 4 * np.eye(4, dtype=np.float32)
    b = rng.standard_normal((3, 4, 5)).astype(np.float32)
    executable = Client().compile(TRSM)
    [call] = [line for line in executable.thunk_sequence().splitlines() if "host lapack_ffi" in line]
    right_sides, solution = call.split("(")[-1].split(", ")[1].split(")")[0], call.split(" -> ")[-1].strip()
    assert right_sides == solution
    [x] = executable.execute_numpy([a, b])
    np.testing.assert_allclose(x, np.linalg.solve(np.triu(a), b), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("module, message", [
    # eigenvalues only: jax's cpu lowering always asks for vectors
    (EIGH.replace("mode = 86 : ui8", "mode = 78 : ui8"), "lapack_ssyevd_ffi: mode = 'N' is not supported"),
    (EIGH.replace("xf32", "xf64"), "lapack_ssyevd_ffi: operand element type f64, where the target takes f32"),
], ids=["eigenvalues only", "element type"])
def test_a_lapack_variant_not_run_is_refused_with_its_location(module, message):
    with pytest.raises(MlirxlaError, match=message) as caught:
        Client().compile(module)
    assert caught.value.location == "<text>:2:10"
