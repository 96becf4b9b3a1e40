"""The native loop over a batch (`runtime/lapack_batches.py`): scipy's routine at jaxlib's
address, called once per matrix with each per-matrix argument stepping by its share, gives
what scipy's own wrapper gives matrix by matrix; a batch of small matrices runs in parts over
the native pool, each part with its own workspaces, with the bits of one thread."""

import numpy as np
import pytest

scipy_lapack = pytest.importorskip("scipy.linalg.lapack")

from mlirxla.errors import MlirxlaError  # noqa: E402
from mlirxla.runtime import lapack_batches, lapack_ffi  # noqa: E402
from mlirxla.runtime.lapack_batches import PerMatrix, Workspace, call, lapack_int  # noqa: E402
from mlirxla.runtime.threads import cpu_threads  # noqa: E402


def integer(value):
    return np.array([value], lapack_int())


def test_a_batch_of_lu_factorizations_matches_scipy_matrix_by_matrix():
    rng = np.random.default_rng(0)
    matrices = rng.standard_normal((2, 3, 5, 4))
    matrices[1, 2] = 0  # singular: info names the first zero pivot
    factors = np.ascontiguousarray(np.swapaxes(matrices, -1, -2))  # each matrix in Fortran order
    pivots, info = np.zeros((2, 3, 4), lapack_int()), np.zeros((2, 3), lapack_int())
    call("dgetrf", 6, [integer(5), integer(4), PerMatrix(factors), integer(5), PerMatrix(pivots), PerMatrix(info)])
    for index in np.ndindex(2, 3):
        lu, expected_pivots, expected_info = scipy_lapack.dgetrf(matrices[index])
        np.testing.assert_array_equal(factors[index].T, lu)
        np.testing.assert_array_equal(pivots[index], expected_pivots + 1)  # scipy's are 0-based, LAPACK's 1-based
        assert info[index] == expected_info
    assert info[1, 2] == 1


def test_a_per_matrix_argument_must_split_into_the_batch():
    with pytest.raises(MlirxlaError, match="does not split into 4 matrices"):
        call("dpotrf", 4, [np.array([ord("L")], np.uint8), integer(2), PerMatrix(np.zeros((3, 3, 3))), integer(2),
                           PerMatrix(np.zeros(4, lapack_int()))])


def test_an_unknown_routine_is_refused():
    with pytest.raises(MlirxlaError, match="no LAPACK or BLAS routine qpotrf"):
        call("qpotrf", 1, [])


def eigendecompositions(symmetric: np.ndarray) -> tuple:
    """dsyevd on every matrix of the batch, with jaxlib's workspace sizes."""
    count, n = symmetric.shape[0], symmetric.shape[-1]
    vectors, values, info = symmetric.copy(), np.zeros((count, n)), np.zeros(count, lapack_int())
    work, integer_work = 1 + 6 * n + 2 * n * n, 3 + 5 * n
    call("dsyevd", count, [np.array([ord("V")], np.uint8), np.array([ord("L")], np.uint8), integer(n), PerMatrix(vectors),
                           integer(n), PerMatrix(values), Workspace(np.zeros(work)), integer(work),
                           Workspace(np.zeros(integer_work, lapack_int())), integer(integer_work), PerMatrix(info)])
    return vectors, values, info


@pytest.mark.skipif(cpu_threads() < 2, reason="one thread: the pool has no helpers")
def test_a_batch_of_small_matrices_runs_in_parts_with_the_bits_of_one_thread(monkeypatch):
    rng = np.random.default_rng(1)
    matrices = rng.standard_normal((60, 40, 40))
    symmetric = matrices + np.swapaxes(matrices, -1, -2)  # its own Fortran order
    assert lapack_batches.batch_parts("dsyevd", 60, 40 * 40) >= 2
    in_parts = eigendecompositions(symmetric)
    monkeypatch.setattr(lapack_batches, "batch_parts", lambda routine, count, largest, work_per_cube=None: 1)
    alone = eigendecompositions(symmetric)
    for parted, whole in zip(in_parts, alone):
        assert parted.tobytes() == whole.tobytes()
    np.testing.assert_allclose(in_parts[1], np.linalg.eigvalsh(symmetric), rtol=1e-12, atol=1e-12)
    assert not in_parts[2].any()


@pytest.mark.skipif(cpu_threads() < 2, reason="one thread: the pool has no helpers")
def test_singular_values_alone_weigh_less_than_an_svd():
    """jnp.linalg.norm(x, 2) of 16 matrices of 16 x 8: gesdd without vectors stays on one
    thread (in a native driver), the full SVD of the same batch runs in parts."""
    from mlirxla.runtime import lapack_ffi

    assert lapack_batches.batch_parts("sgesdd", 16, 16 * 8, lapack_ffi.svd_work_per_cube("A")) >= 2
    assert lapack_batches.batch_parts("sgesdd", 16, 16 * 8, lapack_ffi.svd_work_per_cube("N")) == 1


def test_large_matrices_small_batches_and_blas_stay_on_one_thread():
    assert lapack_batches.batch_parts("dsyevd", 4, 512 * 512) == 1
    assert lapack_batches.batch_parts("dsyevd", 1000, 64 * 64) == 1
    assert lapack_batches.batch_parts("dgetrf", 10, 8 * 8) == 1
    assert lapack_batches.batch_parts("spotrf", 1000, 8 * 8) == 1
    assert lapack_batches.batch_parts("strsm", 1000, 32 * 32) == 1


def test_workspace_queries_are_asked_once_per_shape():
    """LAPACK's workspace answer is kept per routine, dtype and scalar arguments: a second ask
    is not a call, and another shape gets its own answer (a cache keyed too coarsely would hand
    a large matrix a small matrix's workspace)."""
    small = lapack_ffi.geqrf_workspace(4, 4, np.dtype(np.float32))
    large = lapack_ffi.geqrf_workspace(300, 200, np.dtype(np.float32))
    asked = len(lapack_ffi.QUERIED_WORKSPACES)
    assert lapack_ffi.geqrf_workspace(300, 200, np.dtype(np.float32)) == large > small >= 4
    assert len(lapack_ffi.QUERIED_WORKSPACES) == asked
