"""The native loop over a batch (`runtime/lapack_batches.py`): scipy's routine at jaxlib's
address, called once per matrix with each per-matrix argument stepping by its share, gives
what scipy's own wrapper gives matrix by matrix."""

import numpy as np
import pytest

scipy_lapack = pytest.importorskip("scipy.linalg.lapack")

from mlirxla.errors import MlirxlaError  # noqa: E402
from mlirxla.runtime.lapack_batches import PerMatrix, call, lapack_int  # noqa: E402


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
