"""jax's cpu LAPACK custom calls: each linear-algebra function exported by `jax.export` for
jax's cpu backend (so its module holds the `lapack_<t><routine>_ffi` calls jaxlib runs) runs
on mlirxla's cpu backend with the same results as jax's cpu backend, bit for bit (the same
LAPACK routines, through scipy), and the plugin exports eigh, svd, lu and qr with those calls,
which jax accepts and runs again, with symbolic shapes too."""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import export  # noqa: E402
from jax._src.lax import linalg  # noqa: E402

from mlirxla.runtime.client import Client  # noqa: E402

pytestmark = pytest.mark.jax

ALL_TYPES = (np.float32, np.float64, np.complex64, np.complex128)
TWO_TYPES = (np.float32, np.complex128)
REAL_TYPES = (np.float32, np.float64)  # where the program's complex arithmetic around the call rounds otherwise than XLA's
# targets jax emits on cpu that are not in its list of stable ones, which export checks
UNSTABLE_TARGETS = ["tridiagonal_solve_perturbed_ffi"] + [f"lapack_{t}{r}_ffi" for t in "sdcz"
                                                          for r in ("gesvd", "ormqr", "unmqr", "geqp3")]


def matrix(rng, shape, dtype):
    a = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def positive_definite(rng, shape, dtype):
    a = matrix(rng, shape, dtype)
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def tridiagonal_operands(rng, dtype):
    return [matrix(rng, (2, 5), dtype), matrix(rng, (2, 5), dtype) + 4, matrix(rng, (2, 5), dtype), matrix(rng, (2, 5, 3), dtype)]


# name -> (function, its operands, the LAPACK routine its cpu export calls, the element types tested)
CASES = {
    "eigh": (jnp.linalg.eigh, lambda rng, t: [matrix(rng, (2, 4, 4), t)], "evd", ALL_TYPES),
    "svd": (jnp.linalg.svd, lambda rng, t: [matrix(rng, (2, 5, 3), t)], "gesdd", ALL_TYPES),
    "svd_economy": (lambda a: jnp.linalg.svd(a, full_matrices=False), lambda rng, t: [matrix(rng, (2, 3, 5), t)], "gesdd",
                    TWO_TYPES),
    "svd_values": (lambda a: jnp.linalg.svd(a, compute_uv=False), lambda rng, t: [matrix(rng, (2, 3, 5), t)], "gesdd", TWO_TYPES),
    "svd_qr": (lambda a: linalg.svd(a, algorithm=linalg.SvdAlgorithm.QR), lambda rng, t: [matrix(rng, (2, 5, 3), t)], "gesvd",
               TWO_TYPES),
    "lu": (linalg.lu, lambda rng, t: [matrix(rng, (2, 4, 3), t)], "getrf", TWO_TYPES),
    "inv": (jnp.linalg.inv, lambda rng, t: [matrix(rng, (2, 4, 4), t)], "trsm", TWO_TYPES),
    "qr": (jnp.linalg.qr, lambda rng, t: [matrix(rng, (2, 5, 3), t)], "gqr", TWO_TYPES),
    "qr_pivoting": (lambda a: jax.scipy.linalg.qr(a, pivoting=True), lambda rng, t: [matrix(rng, (5, 4), t)], "geqp3",
                    TWO_TYPES),
    "ormqr": (lambda a, c: linalg.ormqr(*linalg.geqrf(a), c, left=True, transpose=True),
              lambda rng, t: [matrix(rng, (5, 3), t), matrix(rng, (5, 2), t)], "mqr", TWO_TYPES),
    "cholesky": (jnp.linalg.cholesky, lambda rng, t: [positive_definite(rng, (2, 4, 4), t)], "potrf", TWO_TYPES),
    "eig": (jnp.linalg.eig, lambda rng, t: [matrix(rng, (2, 4, 4), t)], "geev", TWO_TYPES),
    "eig_left": (lambda a: linalg.eig(a, compute_left_eigenvectors=True), lambda rng, t: [matrix(rng, (4, 4), t)], "geev",
                 TWO_TYPES),
    "eigvals": (jnp.linalg.eigvals, lambda rng, t: [matrix(rng, (3, 5, 5), t)], "geev", TWO_TYPES),
    "schur": (linalg.schur, lambda rng, t: [matrix(rng, (2, 4, 4), t)], "gees", TWO_TYPES),
    "hessenberg": (linalg.hessenberg, lambda rng, t: [matrix(rng, (2, 4, 4), t)], "gehrd", TWO_TYPES),
    "tridiagonal": (lambda a: linalg.tridiagonal(a, lower=False), lambda rng, t: [matrix(rng, (2, 4, 4), t)], "trd",
                    TWO_TYPES),
    "triangular_solve": (lambda a, b: linalg.triangular_solve(a, b, left_side=False, lower=False, transpose_a=True,
                                                              conjugate_a=True, unit_diagonal=True),
                         lambda rng, t: [positive_definite(rng, (2, 3, 3), t), matrix(rng, (2, 4, 3), t)], "trsm", TWO_TYPES),
    "tridiagonal_solve": (linalg.tridiagonal_solve, tridiagonal_operands, "gtsv", TWO_TYPES),
}


@pytest.fixture
def x64():
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", previous)


def on_cpu(function, *operands) -> list[np.ndarray]:
    with jax.default_device(jax.devices("cpu")[0]):
        return [np.asarray(x) for x in jax.tree.leaves(jax.jit(function)(*operands))]


def assert_same_bits(results: list, expected: list) -> None:
    assert len(results) == len(expected)
    for result, want in zip(results, expected):
        assert result.dtype == want.dtype and result.shape == want.shape
        np.testing.assert_array_equal(result, want)


def cpu_export(function, operands) -> str:
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in operands]
    disabled = [export.DisabledSafetyCheck.custom_call(target) for target in UNSTABLE_TARGETS]
    return export.export(jax.jit(function), platforms=["cpu"], disabled_checks=disabled)(*specs).mlir_module()


@pytest.mark.parametrize("name, dtype", [(name, dtype) for name, case in CASES.items() for dtype in case[3]],
                         ids=lambda value: value if isinstance(value, str) else np.dtype(value).name)
def test_cpu_export_runs_bit_for_bit_as_on_jax_cpu(x64, name, dtype):
    function, operands_of, routine, _ = CASES[name]
    operands = operands_of(np.random.default_rng(0), dtype)
    module = cpu_export(function, operands)
    expected = on_cpu(function, *operands)
    assert f"{routine}_ffi" in module
    assert_same_bits(Client().compile(module).execute_numpy(operands), expected)


def with_failures(rng, shape, dtype):
    """A batch whose matrix [0, 1] is all NaN and [1, 0] singular (zeros): the matrices the
    routines fail on, or that jaxlib's geev leaves out, among ones they decompose."""
    a = matrix(rng, shape, dtype)
    a[0, 1] = np.nan
    a[1, 0] = 0
    return a


def not_positive_definite_at_one(rng, shape, dtype):
    a = positive_definite(rng, shape, dtype)
    a[1, 2] = -a[1, 2]
    return a


# name -> (function, its operands over a batch of two dimensions, the routine its cpu export calls, the element types tested)
BATCHED_CASES = {
    "eigh": (jnp.linalg.eigh, lambda rng, t: [matrix(rng, (3, 7, 6, 6), t)], "evd", ALL_TYPES),
    "svd": (jnp.linalg.svd, lambda rng, t: [matrix(rng, (3, 7, 6, 4), t)], "gesdd", ALL_TYPES),
    "svd_failing": (jnp.linalg.svd, lambda rng, t: [with_failures(rng, (2, 3, 4, 4), t)], "gesdd", TWO_TYPES),
    "svd_qr": (lambda a: linalg.svd(a, algorithm=linalg.SvdAlgorithm.QR), lambda rng, t: [matrix(rng, (3, 7, 4, 6), t)],
               "gesvd", TWO_TYPES),
    "qr": (jnp.linalg.qr, lambda rng, t: [matrix(rng, (3, 7, 6, 4), t)], "gqr", ALL_TYPES),
    "lu": (linalg.lu, lambda rng, t: [with_failures(rng, (3, 7, 5, 5), t)], "getrf", ALL_TYPES),
    "cholesky": (jnp.linalg.cholesky, lambda rng, t: [not_positive_definite_at_one(rng, (3, 7, 5, 5), t)], "potrf",
                 ALL_TYPES),
    "solve": (jnp.linalg.solve, lambda rng, t: [matrix(rng, (3, 7, 5, 5), t), matrix(rng, (3, 7, 5, 2), t)], "trsm",
              ALL_TYPES),
    "eig": (jnp.linalg.eig, lambda rng, t: [with_failures(rng, (3, 7, 5, 5), t)], "geev", ALL_TYPES),
    "eig_left": (lambda a: linalg.eig(a, compute_left_eigenvectors=True), lambda rng, t: [matrix(rng, (3, 7, 5, 5), t)],
                 "geev", TWO_TYPES),
    "schur": (linalg.schur, lambda rng, t: [matrix(rng, (3, 7, 5, 5), t)], "gees", TWO_TYPES),
    "hessenberg": (linalg.hessenberg, lambda rng, t: [matrix(rng, (3, 7, 5, 5), t)], "gehrd", TWO_TYPES),
    "tridiagonal": (lambda a: linalg.tridiagonal(a, lower=True), lambda rng, t: [matrix(rng, (3, 7, 5, 5), t)], "trd",
                    TWO_TYPES),
    "qr_pivoting": (lambda a: jax.scipy.linalg.qr(a, pivoting=True), lambda rng, t: [matrix(rng, (3, 7, 6, 5), t)],
                    "geqp3", TWO_TYPES),
    "ormqr": (lambda a, c: linalg.ormqr(*linalg.geqrf(a), c, left=False, transpose=False),
              lambda rng, t: [matrix(rng, (3, 7, 5, 3), t), matrix(rng, (3, 7, 4, 5), t)], "mqr", TWO_TYPES),
    "tridiagonal_solve": (linalg.tridiagonal_solve,
                          lambda rng, t: [matrix(rng, (3, 7, 5), t), matrix(rng, (3, 7, 5), t) + 4, matrix(rng, (3, 7, 5), t),
                                          matrix(rng, (3, 7, 5, 2), t)], "gtsv", TWO_TYPES),
    # matrices of one column, whose transposes are already contiguous, and inputs the programs read again after the call
    "lstsq_of_a_column": (jnp.linalg.lstsq, lambda rng, t: [matrix(rng, (3, 1), t), matrix(rng, (3,), t)], "gesdd",
                          REAL_TYPES),
    "triangular_solve_jvp": (lambda a, b: jax.jvp(lambda x: linalg.triangular_solve(a, x, left_side=True, transpose_a=True,
                                                                                    unit_diagonal=True), (b,), (b,)),
                             lambda rng, t: [matrix(rng, (3, 4, 4), t), matrix(rng, (3, 4, 1), t)], "trsm", TWO_TYPES),
    "eigh_empty_batch": (jnp.linalg.eigh, lambda rng, t: [matrix(rng, (0, 4, 4), t)], "evd", TWO_TYPES),
    "qr_empty_matrices": (jnp.linalg.qr, lambda rng, t: [matrix(rng, (3, 0, 0), t)], "gqr", TWO_TYPES),
}


@pytest.mark.parametrize("name, dtype", [(name, dtype) for name, case in BATCHED_CASES.items() for dtype in case[3]],
                         ids=lambda value: value if isinstance(value, str) else np.dtype(value).name)
def test_batches_run_bit_for_bit_as_on_jax_cpu(x64, name, dtype):
    """Each matrix of a batch of two dimensions gets what jax cpu gives it, the ones a routine
    fails on (NaN, singular, not positive definite) included, and empty batches and matrices
    run."""
    function, operands_of, routine, _ = BATCHED_CASES[name]
    operands = operands_of(np.random.default_rng(6), dtype)
    module = cpu_export(function, operands)
    expected = on_cpu(function, *operands)
    if "empty" not in name:
        assert f"{routine}_ffi" in module
    assert_same_bits(Client().compile(module).execute_numpy(operands), expected)


def test_perturbed_tridiagonal_solve_of_a_singular_system_matches_jax_cpu(x64):
    rng = np.random.default_rng(1)
    dl, d, du, b = tridiagonal_operands(rng, np.float64)
    dl[1, 2] = d[1, 2] = du[1, 2] = 0

    def solve(*operands):
        return linalg.tridiagonal_solve(*operands, perturb_singular=True)

    module = cpu_export(solve, [dl, d, du, b])
    expected = on_cpu(solve, dl, d, du, b)[0]
    assert "tridiagonal_solve_perturbed_ffi" in module
    result = Client().compile(module).execute_numpy([dl, d, du, b])[0]
    np.testing.assert_allclose(result, expected, rtol=1e-12)
    assert np.abs(result[1]).max() > 1e10


@pytest.fixture
def mlirxla_device():
    try:
        device = jax.devices("mlirxla")[0]
    except RuntimeError as error:
        pytest.fail(f"the mlirxla plugin did not register: {error}")
    with jax.default_device(device):
        yield device


@pytest.mark.parametrize("function, target", [(jnp.linalg.eigh, "lapack_ssyevd_ffi"), (jnp.linalg.svd, "lapack_sgesdd_ffi"),
                                              (jnp.linalg.inv, "lapack_sgetrf_ffi"), (jnp.linalg.qr, "lapack_sorgqr_ffi")],
                         ids=["eigh", "svd", "inv", "qr"])
def test_plugin_exports_stable_lapack_calls_and_runs_them(mlirxla_device, function, target):
    """Before, the plugin lowered eigh and svd to its own custom calls, which jax.export refused."""
    a = matrix(np.random.default_rng(2), (2, 4, 4), np.float32)
    exported = export.export(jax.jit(function), platforms=["mlirxla"])(jax.ShapeDtypeStruct(a.shape, a.dtype))
    assert exported.platforms == ("mlirxla",) and target in exported.mlir_module()
    results = jax.tree.leaves(exported.call(a))
    assert all(x.devices() == {mlirxla_device} for x in results)
    for result, want in zip(results, on_cpu(function, a)):
        np.testing.assert_array_equal(np.asarray(result), want)


@pytest.mark.parametrize("function", [jnp.linalg.svd, linalg.lu, jnp.linalg.inv], ids=["svd", "lu", "inv"])
def test_plugin_exports_with_symbolic_matrix_shapes(mlirxla_device, function):
    """jax's cpu rules take symbolic m and n (the plugin's own rules took min(m, n), which
    shape polymorphism cannot decide)."""
    shape = "b, n, n" if function is jnp.linalg.inv else "b, m, n"
    symbolic = jax.ShapeDtypeStruct(export.symbolic_shape(shape), np.float32)
    exported = export.export(jax.jit(function), platforms=["mlirxla"])(symbolic)
    a = matrix(np.random.default_rng(3), (3, 4, 4) if function is jnp.linalg.inv else (3, 5, 4), np.float32)
    for result, want in zip(jax.tree.leaves(exported.call(a)), on_cpu(function, a)):
        np.testing.assert_allclose(np.asarray(result), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("algorithm", [linalg.EighImplementation.QR, linalg.EighImplementation.JACOBI,
                                       linalg.EighImplementation.QDWH], ids=lambda a: a.name)
def test_plugin_eigh_takes_algorithms_jax_cpu_refuses(mlirxla_device, algorithm):
    """jax's eigh tests ask every platform but cpu and gpu for the Jacobi and QDWH eigensolvers,
    which jax's cpu rule refuses; the plugin runs QDWH as jax's own and Jacobi as LAPACK's."""
    a = matrix(np.random.default_rng(4), (6, 6), np.float32)
    a = a + a.T
    vectors, values = jax.jit(lambda m: linalg.eigh(m, implementation=algorithm))(a)
    np.testing.assert_allclose(np.sort(values), np.linalg.eigvalsh(a), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(a @ vectors, vectors * values, rtol=1e-4, atol=1e-4)


def test_plugin_eigh_and_svd_of_a_subset(mlirxla_device):
    """Subsets of eigenvalues and singular values, which jax's cpu rules refuse, as jax's QDWH
    eigh and polar svd."""
    a = matrix(np.random.default_rng(5), (6, 6), np.float32)
    symmetric = a + a.T
    _, values = jax.jit(lambda m: linalg.eigh(m, subset_by_index=(0, 3)))(symmetric)
    np.testing.assert_allclose(values, np.linalg.eigvalsh(symmetric)[:3], rtol=1e-5, atol=1e-5)
    for algorithm in (linalg.SvdAlgorithm.POLAR, None):
        singular = jax.jit(lambda m: linalg.svd(m, full_matrices=False, compute_uv=False, subset_by_index=(0, 2),
                                                algorithm=algorithm))(a)
        np.testing.assert_allclose(singular, np.linalg.svd(a, compute_uv=False)[:2], rtol=1e-5, atol=1e-5)
    u, s, vt = jax.jit(lambda m: linalg.svd(m, algorithm=linalg.SvdAlgorithm.JACOBI))(a)
    np.testing.assert_allclose((u * s) @ vt, a, rtol=1e-4, atol=1e-5)
