"""jax's cpu LAPACK custom calls on the host: the `lapack_<t><routine>_ffi` targets jax's cpu
lowering emits (and `jax.export` guarantees stable), and `tridiagonal_solve_perturbed_ffi`.

jaxlib's kernels call the LAPACK and BLAS routines scipy ships (`scipy.linalg.cython_lapack`);
each call here runs scipy's wrapper of the same routine on the same matrix, with the workspace
sizes jaxlib asks for (the optimal size from a workspace query; syevd's and heevd's minimal
sizes, scipy's defaults), so the results match jax's cpu backend bit for bit. Like jaxlib's
kernels, a call runs matrix by matrix over the leading (batch) dimensions and returns every
result the custom call declares, in jaxlib's order and forms: the overwritten input where
jaxlib aliases it, 1-based pivots, `info` per matrix (the program turns a nonzero one into
NaNs), a real geev's eigenvectors unpacked into complex ones, and `info = -4` without calling
geev for a matrix with a non-finite entry. Outputs a mode does not compute (gesdd's u and vt
for mode N, gees's Schur vectors for mode N) are zeros, where jaxlib leaves them unwritten.

Operands arrive as row-major numpy views with their logical shapes; the custom call's
column-major `operand_layouts` say how jaxlib reads the same logical matrices, so each matrix
is copied into Fortran order for the routine, and its results are written back by value.
`attributes`: the routine, its `mhlo.backend_config` (characters as one-letter strings), and
the declared [shape, dtype] of each result (`backends/cpu/emitters/host_calls.py` reads them
off the op and refuses the variants not run here)."""

import numpy as np

from mlirxla.errors import MlirxlaError

from . import tridiagonal_solve

TYPE_LETTERS = {"float32": "s", "float64": "d", "complex64": "c", "complex128": "z"}
GEEV_NON_FINITE_INFO = -4  # what jaxlib reports, without calling geev, for a matrix with a NaN or infinity


def run(operands: list[np.ndarray], attributes: dict) -> list[np.ndarray]:
    results = [(tuple(shape), np.dtype(dtype)) for shape, dtype in attributes["results"]]
    return ROUTINES[attributes["routine"]](operands, attributes["config"], results)


def routine(name: str, dtype: np.dtype):
    import scipy.linalg.lapack

    return getattr(scipy.linalg.lapack, TYPE_LETTERS[np.dtype(dtype).name] + name)


def optimal_workspace(query) -> int:
    """The workspace size a LAPACK workspace query (lwork = -1) reports, as jaxlib reads it."""
    return int(np.real(query))


def workspace_per_shape(query):
    """The optimal workspace of `query(*matrices)` (a workspace query returning its `work`),
    asked once per shape of the matrices: every matrix of a batch gets the same size."""
    sizes = {}

    def size(*matrices):
        shapes = tuple(matrix.shape for matrix in matrices)
        if shapes not in sizes:
            sizes[shapes] = optimal_workspace(query(*matrices)[0])
        return sizes[shapes]

    return size


def fortran(matrix: np.ndarray) -> np.ndarray:
    return np.array(matrix, order="F")


def over_batch(operands: list[np.ndarray], results: list, matrix_rank, one) -> list[np.ndarray]:
    """`one` on each matrix of the batch (the first operand's leading dimensions, all but its
    last `matrix_rank` ones), its results written into arrays of the declared shapes; a
    result `one` leaves as None stays zero."""
    outputs = [np.zeros(shape, dtype) for shape, dtype in results]
    batch = operands[0].shape[: operands[0].ndim - matrix_rank]
    for index in np.ndindex(*batch):
        for output, value in zip(outputs, one(*(operand[index] for operand in operands))):
            if value is not None:
                output[index] = value
    return outputs


def potrf(operands, config, results):
    factor = routine("potrf", operands[0].dtype)
    # clean=0: the other triangle keeps the input, as LAPACK leaves it
    return over_batch(operands, results, 2, lambda a: factor(fortran(a), lower=config["uplo"] == "L", clean=0))


def getrf(operands, config, results):
    factor = routine("getrf", operands[0].dtype)

    def one(a):
        lu, pivots, info = factor(fortran(a))
        return lu, pivots + 1, info  # scipy's pivots are 0-based, LAPACK's (and jaxlib's) 1-based

    return over_batch(operands, results, 2, one)


def geqrf(operands, config, results):
    factor = routine("geqrf", operands[0].dtype)
    lwork = workspace_per_shape(lambda a: factor(a, lwork=-1)[2])

    def one(a):
        qr, tau, _, _ = factor(fortran(a), lwork=lwork(a))
        return qr, tau

    return over_batch(operands, results, 2, one)


def geqp3(operands, config, results):
    factor = routine("geqp3", operands[0].dtype)
    if np.any(operands[1]):
        raise MlirxlaError("lapack geqp3: preset column pivots (a nonzero jpvt operand) are not supported")

    lwork = workspace_per_shape(lambda a: factor(a, lwork=-1)[3])

    def one(a, jpvt):
        qr, pivots, tau, _, _ = factor(fortran(a), lwork=lwork(a))
        return qr, pivots, tau

    return over_batch(operands, results, 2, one)


def orgqr(operands, config, results):
    generate = routine("ungqr" if np.iscomplexobj(operands[0]) else "orgqr", operands[0].dtype)

    lwork = workspace_per_shape(lambda a, tau: generate(a, tau, lwork=-1)[1])

    def one(a, tau):
        return [generate(fortran(a), tau, lwork=lwork(a, tau))[0]]

    return over_batch(operands, results, 2, one)


def ormqr(operands, config, results):
    complex_type = np.iscomplexobj(operands[0])
    multiply = routine("unmqr" if complex_type else "ormqr", operands[0].dtype)
    side = "L" if config["left"] else "R"
    trans = ("C" if complex_type else "T") if config["transpose"] else "N"

    lwork = workspace_per_shape(lambda a, tau, c: multiply(side, trans, a, tau, c, -1)[1])

    def one(a, tau, c):
        return [multiply(side, trans, fortran(a), tau, fortran(c), lwork(a, tau, c))[0]]

    return over_batch(operands, results, 2, one)


def syevd(operands, config, results):
    decompose = routine("heevd" if np.iscomplexobj(operands[0]) else "syevd", operands[0].dtype)

    def one(a):
        values, vectors, info = decompose(fortran(a), compute_v=1, lower=int(config["uplo"] == "L"))
        return vectors, values, info

    return over_batch(operands, results, 2, one)


def svd_modes(config) -> tuple[int, int]:
    """(compute_uv, full_matrices) of gesdd / gesvd's job letter: A all, S the leading
    min(m, n) vectors, N none."""
    return int(config["mode"] != "N"), int(config["mode"] == "A")


def gesdd(operands, config, results, name="gesdd"):
    decompose = routine(name, operands[0].dtype)
    lwork_query = routine(name + "_lwork", operands[0].dtype)
    compute_uv, full_matrices = svd_modes(config)

    lwork = optimal_workspace(lwork_query(*operands[0].shape[-2:], compute_uv=compute_uv, full_matrices=full_matrices)[0])

    def one(a):
        overwritten = fortran(a)
        u, s, vt, info = decompose(overwritten, compute_uv=compute_uv, full_matrices=full_matrices, lwork=lwork,
                                   overwrite_a=1)
        return overwritten, s, u if compute_uv else None, vt if compute_uv else None, info

    return over_batch(operands, results, 2, one)


def gesvd(operands, config, results):
    return gesdd(operands, config, results, name="gesvd")


def unpack_eigenvectors(imaginary: np.ndarray, packed: np.ndarray) -> np.ndarray:
    """A real geev's eigenvectors as complex ones (jaxlib's `UnpackEigenvectors`): a complex
    conjugate pair's two columns hold the real and imaginary parts of the first."""
    unpacked = packed.astype(np.result_type(packed.dtype, np.complex64))
    j = 0
    while j < len(imaginary):
        if imaginary[j] == 0 or np.isnan(imaginary[j]):
            j += 1
            continue
        unpacked[:, j] = packed[:, j] + 1j * packed[:, j + 1]
        unpacked[:, j + 1] = packed[:, j] - 1j * packed[:, j + 1]
        j += 2
    return unpacked


def geev(operands, config, results):
    a = operands[0]
    complex_type = np.iscomplexobj(a)
    decompose = routine("geev", a.dtype)
    lwork_query = routine("geev_lwork", a.dtype)
    left, right = int(config["compute_left"] == "V"), int(config["compute_right"] == "V")
    lwork = optimal_workspace(lwork_query(a.shape[-1], compute_vl=left, compute_vr=right)[0])
    info_only = (None,) * (len(results) - 1)

    def one(matrix):
        if not np.isfinite(matrix).all():
            return info_only + (GEEV_NON_FINITE_INFO,)
        if complex_type:
            return decompose(fortran(matrix), compute_vl=left, compute_vr=right, lwork=lwork)
        real, imaginary, vl, vr, info = decompose(fortran(matrix), compute_vl=left, compute_vr=right, lwork=lwork)
        if info != 0:
            return real, imaginary, None, None, info
        return (real, imaginary, unpack_eigenvectors(imaginary, vl) if left else None,
                unpack_eigenvectors(imaginary, vr) if right else None, info)

    return over_batch(operands, results, 2, one)


def gees(operands, config, results):
    a = operands[0]
    decompose = routine("gees", a.dtype)
    vectors = int(config["mode"] == "V")

    def no_selection(*eigenvalue):
        return 0

    lwork = workspace_per_shape(lambda matrix: decompose(no_selection, matrix, compute_v=vectors, lwork=-1)[-2])

    def one(matrix):
        if np.iscomplexobj(matrix):
            t, sdim, w, vs, _, info = decompose(no_selection, fortran(matrix), compute_v=vectors, lwork=lwork(matrix))
            return t, vs if vectors else None, w, sdim, info
        t, sdim, real, imaginary, vs, _, info = decompose(no_selection, fortran(matrix), compute_v=vectors,
                                                          lwork=lwork(matrix))
        return t, vs if vectors else None, real, imaginary, sdim, info

    return over_batch(operands, results, 2, one)


def gehrd(operands, config, results):
    a = operands[0]
    reduce = routine("gehrd", a.dtype)
    lwork_query = routine("gehrd_lwork", a.dtype)
    low, high = config["low"] - 1, config["high"] - 1  # jaxlib passes LAPACK's 1-based ilo, ihi; scipy takes 0-based
    lwork = optimal_workspace(lwork_query(a.shape[-1], lo=low, hi=high)[0])

    def one(matrix):
        reduced, tau, info = reduce(fortran(matrix), lo=low, hi=high, lwork=lwork)
        return reduced, tau[: max(matrix.shape[-1] - 1, 0)], info

    return over_batch(operands, results, 2, one)


def sytrd(operands, config, results):
    a = operands[0]
    name = "hetrd" if np.iscomplexobj(a) else "sytrd"
    reduce = routine(name, a.dtype)
    lower = int(config["uplo"] == "L")
    lwork = optimal_workspace(routine(name + "_lwork", a.dtype)(a.shape[-1], lower=lower)[0])
    return over_batch(operands, results, 2, lambda matrix: reduce(fortran(matrix), lower=lower, lwork=lwork))


TRANSPOSES = {"N": 0, "T": 1, "C": 2}


def trsm(operands, config, results):
    import scipy.linalg.blas

    a = operands[0]
    solve = getattr(scipy.linalg.blas, TYPE_LETTERS[a.dtype.name] + "trsm")
    flags = {"side": int(config["side"] == "R"), "lower": int(config["uplo"] == "L"),
             "trans_a": TRANSPOSES[config["trans_x"]], "diag": int(config["diag"] == "U")}
    return over_batch(operands, results, 2, lambda matrix, b: [solve(1, fortran(matrix), fortran(b), **flags)])


def gtsv(operands, config, results):
    """jaxlib's gtsv: jax's sub-diagonal starts with a padding zero (dl[0]), so LAPACK gets dl[1:];
    the factorization overwrites the three diagonals in place, as in jaxlib."""
    solve = routine("gtsv", operands[3].dtype)

    def one(dl, d, du, b):
        dl, d, du, x = dl.copy(), d.copy(), du.copy(), fortran(b)
        if len(d) == 0:
            return dl, d, du, x, 0
        *_, info = solve(dl[1:], d, du[:-1], x, overwrite_dl=1, overwrite_d=1, overwrite_du=1, overwrite_b=1)
        return dl, d, du, x, info

    return over_batch(operands, results, 1, one)


def tridiagonal_solve_perturbed(operands, config, results):
    return [tridiagonal_solve.solve_perturbed(*operands)]


ROUTINES = {"potrf": potrf, "getrf": getrf, "geqrf": geqrf, "geqp3": geqp3, "orgqr": orgqr, "ormqr": ormqr,
            "syevd": syevd, "gesdd": gesdd, "gesvd": gesvd, "geev": geev, "gees": gees, "gehrd": gehrd,
            "sytrd": sytrd, "trsm": trsm, "gtsv": gtsv, "tridiagonal_solve_perturbed": tridiagonal_solve_perturbed}
