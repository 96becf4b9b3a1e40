"""jax's cpu LAPACK custom calls on the host: the `lapack_<t><routine>_ffi` targets jax's cpu
lowering emits (and `jax.export` guarantees stable), and `tridiagonal_solve_perturbed_ffi`.

Each runs as jaxlib's kernel does: the same routine of scipy's LAPACK or BLAS (the function
`scipy.linalg.cython_lapack` exports, which jaxlib calls), with the same arguments (leading
dimensions, workspace sizes: the optimal size of a workspace query where jaxlib asks for one,
its fixed formulas elsewhere, such as syevd's and heevd's minimal sizes), once per matrix of
the batch by one native loop (`runtime/lapack_batches.py`), so the results match jax's cpu
backend bit for bit and a batch of small matrices costs what jaxlib's loop costs. Every
result the custom call declares is returned, in jaxlib's order and forms: the overwritten
input where jaxlib aliases it, 1-based pivots, `info` per matrix (the program turns a nonzero
one into NaNs), a real geev's eigenvectors unpacked into complex ones, and `info = -4`
without calling geev for a matrix with a non-finite entry. Outputs a mode does not compute
(gesdd's u and vt for mode N, gees's Schur vectors for mode N) and geev's vectors where it
failed are zeros, where jaxlib leaves them unwritten. A leading dimension is at least 1, as
LAPACK requires: jaxlib passes 0 for an empty matrix, which LAPACK refuses (with a message
on stderr) without touching anything.

Operands arrive as numpy views with their logical shapes. The custom call's column-major
`operand_layouts` say how jaxlib reads the same logical matrices; the compiler made them
transposes around the call (`transforms/custom_call_layouts.py`), so the views are of
buffers that already hold each matrix in Fortran order, and the batch is copied at once,
a plain copy, into one array holding them so (`column_major`). The routine works on that
copy, and its results are returned as views with the logical shapes, which the host call
writes into buffers of the same order.
`attributes`: the routine, its `mhlo.backend_config` (characters as one-letter strings), and
the declared [shape, dtype] of each result (`backends/cpu/emitters/host_calls.py` reads them
off the op and refuses the variants not run here)."""

import math

import numpy as np

from . import tridiagonal_solve
from .lapack_batches import SINGULAR_VALUES_WORK_PER_CUBE, PerMatrix, Workspace, call, lapack_int

TYPE_LETTERS = {"float32": "s", "float64": "d", "complex64": "c", "complex128": "z"}
GEEV_NON_FINITE_INFO = -4  # what jaxlib reports, without calling geev, for a matrix with a NaN or infinity


def run(operands: list[np.ndarray], attributes: dict) -> list[np.ndarray]:
    results = [(tuple(shape), np.dtype(dtype)) for shape, dtype in attributes["results"]]
    return ROUTINES[attributes["routine"]](operands, attributes["config"], results)


def named(routine: str, dtype: np.dtype) -> str:
    """The routine for `dtype`'s elements (`potrf` of complex64 is `cpotrf`)."""
    return TYPE_LETTERS[np.dtype(dtype).name] + routine


def real_type(dtype: np.dtype) -> np.dtype:
    return np.finfo(dtype).dtype


def integer(value: int) -> np.ndarray:
    return np.array([value], lapack_int())


def character(letter: str) -> np.ndarray:
    return np.array([ord(letter)], np.uint8)


def leading(rows: int) -> np.ndarray:
    """A leading dimension: at least 1, as LAPACK requires even of an empty matrix."""
    return integer(max(rows, 1))


def batch_of(array: np.ndarray, rank: int) -> tuple[int, ...]:
    return array.shape[: array.ndim - rank]


def count_of(batch: tuple[int, ...]) -> int:
    return math.prod(batch)


def column_major(matrices: np.ndarray) -> np.ndarray:
    """A copy of the batch as one C-contiguous array holding each matrix in Fortran order (the
    batch of transposes), the memory jaxlib's column-major buffers hold. Always a copy: the
    routines overwrite it, and for matrices of one row or column the transposes are already
    contiguous (`np.ascontiguousarray` would hand back the operand's own buffer, which the
    program may read again: jax's lstsq of a column read its overwritten input)."""
    return np.array(np.swapaxes(matrices, -1, -2), order="C")


def logical(buffer: np.ndarray) -> np.ndarray:
    """A `column_major` batch seen with its matrices' logical shapes again."""
    return np.swapaxes(buffer, -1, -2)


def column_major_zeros(batch: tuple[int, ...], shape, dtype) -> np.ndarray:
    """A `column_major` batch of zero matrices of logical shape `shape`."""
    return np.zeros(batch + (shape[-1], shape[-2]), dtype)


def infos(batch: tuple[int, ...]) -> np.ndarray:
    return np.zeros(batch, lapack_int())


QUERIED_WORKSPACES: dict = {}  # (routine, dtype, its scalar arguments) -> LAPACK's answer


def optimal_workspace(name: str, dtype: np.dtype, arguments_of, key: tuple) -> int:
    """The workspace size LAPACK's workspace query (lwork = -1) reports, as jaxlib reads it
    (the real part, truncated); `arguments_of(size, lwork)` are the query's arguments, `key`
    the scalars they depend on: the answer is asked once per key (jaxlib asks per call; a
    7 x 7 eig spent half its 220 us asking)."""
    cache_key = (name, np.dtype(dtype).str, key)
    if cache_key not in QUERIED_WORKSPACES:
        size = np.zeros(1, dtype)
        call(name, 1, arguments_of(size, integer(-1)))
        QUERIED_WORKSPACES[cache_key] = int(np.real(size[0]))
    return QUERIED_WORKSPACES[cache_key]


def workspace(size: int, dtype) -> Workspace:
    return Workspace(np.zeros(max(size, 1), dtype))


def potrf(operands, config, results):
    batch, n = batch_of(operands[0], 2), operands[0].shape[-1]
    a, info = column_major(operands[0]), infos(batch)
    call(named("potrf", a.dtype), count_of(batch),
         [character(config["uplo"]), integer(n), PerMatrix(a), leading(n), PerMatrix(info)])
    return [logical(a), info]


def getrf(operands, config, results):
    batch, (m, n) = batch_of(operands[0], 2), operands[0].shape[-2:]
    a, pivots, info = column_major(operands[0]), np.zeros(batch + (min(m, n),), lapack_int()), infos(batch)
    call(named("getrf", a.dtype), count_of(batch),
         [integer(m), integer(n), PerMatrix(a), leading(m), PerMatrix(pivots), PerMatrix(info)])
    return [logical(a), pivots, info]


def geqrf_workspace(m: int, n: int, dtype) -> int:
    """The optimal workspace of geqrf on m x n matrices of `dtype`, in elements."""
    return optimal_workspace(named("geqrf", dtype), dtype, lambda work, lwork: [integer(m), integer(n), None, leading(m), None,
                                                                                work, lwork, integer(0)], key=(m, n))


def orgqr_workspace(m: int, n: int, k: int, dtype) -> int:
    """The optimal workspace of orgqr (ungqr) making m x n matrices of k reflectors, in elements."""
    name = named("ungqr" if np.dtype(dtype).kind == "c" else "orgqr", dtype)
    return optimal_workspace(name, dtype, lambda work, lwork: [integer(m), integer(n), integer(k), None, leading(m), None,
                                                               work, lwork, integer(0)], key=(m, n, k))


def geqrf(operands, config, results):
    batch, (m, n) = batch_of(operands[0], 2), operands[0].shape[-2:]
    name = named("geqrf", operands[0].dtype)
    a, tau = column_major(operands[0]), np.zeros(batch + (min(m, n),), operands[0].dtype)
    size = geqrf_workspace(m, n, a.dtype)
    call(name, count_of(batch), [integer(m), integer(n), PerMatrix(a), leading(m), PerMatrix(tau), workspace(size, a.dtype),
                                 integer(size), integer(0)])
    return [logical(a), tau]


def geqp3(operands, config, results):
    batch, (m, n) = batch_of(operands[0], 2), operands[0].shape[-2:]
    dtype = operands[0].dtype
    a, tau, name = column_major(operands[0]), np.zeros(batch + (min(m, n),), dtype), named("geqp3", dtype)
    pivots = np.array(operands[1], lapack_int())  # preset pivots, LAPACK's 1-based columns, as jaxlib passes them
    complex_type = np.iscomplexobj(a)
    size = optimal_workspace(name, dtype, lambda work, lwork: [integer(m), integer(n), None, leading(m), None, None, work, lwork]
                             + [None] * complex_type + [integer(0)], key=(m, n))
    real_work = [workspace(2 * n, real_type(dtype))] if complex_type else []
    call(name, count_of(batch), [integer(m), integer(n), PerMatrix(a), leading(m), PerMatrix(pivots), PerMatrix(tau),
                                 workspace(size, dtype), integer(size)] + real_work + [integer(0)])
    return [logical(a), pivots, tau]


def orgqr(operands, config, results):
    batch, (m, n), k = batch_of(operands[0], 2), operands[0].shape[-2:], operands[1].shape[-1]
    dtype = operands[0].dtype
    name = named("ungqr" if np.iscomplexobj(operands[0]) else "orgqr", dtype)
    a, tau = column_major(operands[0]), np.ascontiguousarray(operands[1])
    size = orgqr_workspace(m, n, k, dtype)
    call(name, count_of(batch), [integer(m), integer(n), integer(k), PerMatrix(a), leading(m), PerMatrix(tau),
                                 workspace(size, dtype), integer(size), integer(0)])
    return [logical(a)]


def ormqr(operands, config, results):
    batch, (m, n), k = batch_of(operands[2], 2), operands[2].shape[-2:], operands[1].shape[-1]
    dtype = operands[2].dtype
    complex_type = np.iscomplexobj(operands[2])
    name = named("unmqr" if complex_type else "ormqr", dtype)
    side = character("L" if config["left"] else "R")
    trans = character(("C" if complex_type else "T") if config["transpose"] else "N")
    lda = leading(operands[0].shape[-2] if config["left"] else n)
    a, tau, c = column_major(operands[0]), np.ascontiguousarray(operands[1]), column_major(operands[2])
    size = optimal_workspace(name, dtype, lambda work, lwork: [side, trans, integer(m), integer(n), integer(k), None, lda,
                                                               None, None, leading(m), work, lwork, integer(0)],
                             key=(config["left"], config["transpose"], m, n, k, operands[0].shape[-2]))
    call(name, count_of(batch), [side, trans, integer(m), integer(n), integer(k), PerMatrix(a), lda, PerMatrix(tau),
                                 PerMatrix(c), leading(m), workspace(size, dtype), integer(size), integer(0)])
    return [logical(c)]


def syevd_workspaces(n: int) -> tuple[int, int]:
    """jaxlib's work and iwork sizes for syevd with eigenvectors, in elements: LAPACK's minimal
    ones (heevd's iwork too)."""
    return 1 + 6 * n + 2 * n * n, 3 + 5 * n


def heevd_workspaces(n: int) -> tuple[int, int]:
    """jaxlib's complex work and real rwork sizes for heevd with eigenvectors, in elements
    (LAPACK's minimal ones; iwork as syevd's)."""
    return 2 * n + n * n, 1 + 5 * n + 2 * n * n


def syevd(operands, config, results):
    """jaxlib's fixed workspaces: LAPACK's minimal sizes for eigenvectors."""
    batch, n = batch_of(operands[0], 2), operands[0].shape[-1]
    dtype = operands[0].dtype
    a, values, info = column_major(operands[0]), np.zeros(batch + (n,), real_type(dtype)), infos(batch)
    start = [character("V"), character(config["uplo"]), integer(n), PerMatrix(a), leading(n), PerMatrix(values)]
    work_size, integer_size = syevd_workspaces(n)
    integer_work = [workspace(integer_size, lapack_int()), integer(integer_size), PerMatrix(info)]
    if np.iscomplexobj(a):
        complex_size, real_size = heevd_workspaces(n)
        works = [workspace(complex_size, dtype), integer(complex_size), workspace(real_size, real_type(dtype)), integer(real_size)]
        call(named("heevd", dtype), count_of(batch), start + works + integer_work)
    else:
        call(named("syevd", dtype), count_of(batch), start + [workspace(work_size, dtype), integer(work_size)] + integer_work)
    return [logical(a), values, info]


def svd_real_workspace(m: int, n: int, mode: str) -> int:
    """jaxlib's rwork size for a complex gesdd."""
    small, large = min(m, n), max(m, n)
    if mode == "N":
        return 7 * small
    return max(5 * small * small + 5 * small, 2 * large * small + 2 * small * small + small)


def svd_workspace(method: str, m: int, n: int, mode: str, dtype) -> int:
    """The optimal workspace of gesdd or gesvd (`method`) on m x n matrices in `mode`, in
    elements, queried as jaxlib queries it (vt's leading dimension n for mode A, else min(m, n))."""
    complex_type = np.dtype(dtype).kind == "c"
    jobs = [character(mode)] * (2 if method == "gesvd" else 1)
    query_vt_rows = n if mode == "A" else min(m, n)
    after_work = [None] * complex_type + ([None] if method == "gesdd" else []) + [integer(0)]
    return optimal_workspace(named(method, dtype), dtype, lambda work, lwork: jobs + [integer(m), integer(n), None, leading(m), None, None,
                                                                                       leading(m), None, leading(query_vt_rows), work, lwork]
                             + after_work, key=(m, n, mode))


def gesdd(operands, config, results, method="gesdd"):
    """gesdd (divide and conquer) or gesvd (QR iteration, `method`): jaxlib's u and vt of the
    declared shapes, their leading dimensions m and vt's rows (m or min(m, n) in the query)."""
    batch, (m, n) = batch_of(operands[0], 2), operands[0].shape[-2:]
    dtype, mode = operands[0].dtype, config["mode"]
    name, complex_type = named(method, dtype), np.iscomplexobj(operands[0])
    a, info = column_major(operands[0]), infos(batch)
    singular_values = np.zeros(batch + (min(m, n),), real_type(dtype))
    (u_shape, _), (vt_shape, _) = results[2], results[3]
    u, vt = column_major_zeros(batch, u_shape, dtype), column_major_zeros(batch, vt_shape, dtype)
    jobs = [character(mode)] * (2 if method == "gesvd" else 1)
    size = svd_workspace(method, m, n, mode, dtype)
    if method == "gesdd":
        real_work = [workspace(svd_real_workspace(m, n, mode), real_type(dtype))] if complex_type else []
        extra = real_work + [workspace(8 * min(m, n), lapack_int())]
    else:
        extra = [workspace(5 * min(m, n), real_type(dtype))] if complex_type else []
    call(name, count_of(batch), jobs + [integer(m), integer(n), PerMatrix(a), leading(m), PerMatrix(singular_values),
                                        PerMatrix(u), leading(m), PerMatrix(vt), leading(vt_shape[-2]),
                                        workspace(size, dtype), integer(size)] + extra + [PerMatrix(info)],
         svd_work_per_cube(mode))
    return [logical(a), singular_values, logical(u), logical(vt), info]


def svd_work_per_cube(mode: str) -> float | None:
    """An SVD's weight for `lapack_batches.batch_parts`: lighter without vectors."""
    return SINGULAR_VALUES_WORK_PER_CUBE if mode == "N" else None


def gesvd(operands, config, results):
    return gesdd(operands, config, results, method="gesvd")


def unpack_eigenvectors(imaginary: np.ndarray, packed: np.ndarray) -> np.ndarray:
    """A real geev's eigenvectors as complex ones (jaxlib's `UnpackEigenvectors`), over a
    batch: a complex conjugate pair's two columns hold the real and imaginary parts of the
    first; column j starts a pair where its eigenvalue has a nonzero (not NaN) imaginary part
    and column j - 1 did not start one. Only which columns start a pair is found column by
    column; the columns are unpacked at once."""
    complex_eigenvalue = (imaginary != 0) & ~np.isnan(imaginary)
    starts = np.zeros(imaginary.shape, bool)
    for j in range(imaginary.shape[-1] - 1):
        starts[..., j] = complex_eigenvalue[..., j] & ~(starts[..., j - 1] if j else False)
    unpacked = packed.astype(np.result_type(packed.dtype, np.complex64))
    pair = starts[..., None, :-1]
    real_part, imaginary_part = packed[..., :, :-1], packed[..., :, 1:]
    unpacked[..., :, :-1] = np.where(pair, real_part + 1j * imaginary_part, unpacked[..., :, :-1])
    unpacked[..., :, 1:] = np.where(pair, real_part - 1j * imaginary_part, unpacked[..., :, 1:])
    return unpacked


def geev_workspace(n: int, dtype, compute_left: str, compute_right: str) -> int:
    """The optimal workspace of geev on n x n matrices, in elements, queried as jaxlib queries
    it (a complex geev's real workspace of 2n, an integer info after it)."""
    left, right = character(compute_left), character(compute_right)
    if np.dtype(dtype).kind == "c":
        def arguments(work, lwork):
            return [left, right, integer(n), None, leading(n), None, None, leading(n), None, leading(n), work, lwork,
                    np.zeros(1, real_type(dtype)), integer(0)]
    else:
        def arguments(work, lwork):
            return [left, right, integer(n), None, leading(n), None, None, None, leading(n), None, leading(n), work, lwork,
                    integer(0)]
    return optimal_workspace(named("geev", dtype), dtype, arguments, key=(compute_left, compute_right, n))


def geev(operands, config, results):
    """Matrices with a non-finite entry are left out (`info = -4`), the others decomposed as
    one batch; a real geev's packed vectors are unpacked where it succeeded."""
    a = operands[0]
    batch, n, dtype = batch_of(a, 2), a.shape[-1], a.dtype
    complex_type = np.iscomplexobj(a)
    name = named("geev", dtype)
    left, right = character(config["compute_left"]), character(config["compute_right"])
    finite = np.isfinite(a).all(axis=(-2, -1))
    chosen = column_major(a[finite])
    count = chosen.shape[0]
    info = np.zeros(count, lapack_int())
    vectors = [np.zeros((count, n, n), dtype) for _ in range(2)]
    size = geev_workspace(n, dtype, config["compute_left"], config["compute_right"])
    if complex_type:
        values = [np.zeros((count, n), dtype)]
        real_work = [workspace(2 * n, real_type(dtype))]
    else:
        values = [np.zeros((count, n), dtype), np.zeros((count, n), dtype)]
        real_work = []
    call(name, count, [left, right, integer(n), PerMatrix(chosen), leading(n)] + [PerMatrix(v) for v in values]
         + [PerMatrix(vectors[0]), leading(n), PerMatrix(vectors[1]), leading(n), workspace(size, dtype), integer(size)]
         + real_work + [PerMatrix(info)])
    vectors = [logical(v) for v in vectors]
    if not complex_type:  # vectors not computed stay zeros (complex ones)
        succeeded, complex_dtype = (info == 0)[:, None, None], np.result_type(dtype, np.complex64)
        vectors = [np.where(succeeded, unpack_eigenvectors(values[1], v), 0) if config[side] == "V" else v.astype(complex_dtype)
                   for v, side in zip(vectors, ("compute_left", "compute_right"))]
    outputs = [np.zeros(batch + value.shape[1:], value.dtype) for value in values + vectors]
    for output, value in zip(outputs, values + vectors):
        output[finite] = value
    all_info = np.full(batch, GEEV_NON_FINITE_INFO, lapack_int())
    all_info[finite] = info
    return outputs + [all_info]


def gees(operands, config, results):
    """No eigenvalue ordering (jaxlib's `select` is null): sdim is 0."""
    batch, n, dtype = batch_of(operands[0], 2), operands[0].shape[-1], operands[0].dtype
    complex_type = np.iscomplexobj(operands[0])
    name = named("gees", dtype)
    mode, sort = character(config["mode"]), character(config["sort"])
    a, vectors, selected, info = column_major(operands[0]), np.zeros(batch + (n, n), dtype), infos(batch), infos(batch)
    values = [np.zeros(batch + (n,), dtype) for _ in range(1 if complex_type else 2)]
    size = optimal_workspace(name, dtype, lambda work, lwork: [mode, sort, None, integer(n), None, leading(n), None]
                             + [None] * len(values) + [None, leading(n), work, lwork] + [None] * complex_type
                             + [None, integer(0)], key=(config["mode"], config["sort"], n))
    real_work = [workspace(n, real_type(dtype))] if complex_type else []
    call(name, count_of(batch), [mode, sort, None, integer(n), PerMatrix(a), leading(n), PerMatrix(selected)]
         + [PerMatrix(v) for v in values] + [PerMatrix(vectors), leading(n), workspace(size, dtype), integer(size)]
         + real_work + [None, PerMatrix(info)])
    return [logical(a), logical(vectors)] + values + [selected, info]


def gehrd(operands, config, results):
    """ilo and ihi are jaxlib's `low` and `high`, 1-based as LAPACK takes them."""
    batch, (m, n), dtype = batch_of(operands[0], 2), operands[0].shape[-2:], operands[0].dtype
    name, low, high = named("gehrd", dtype), integer(config["low"]), integer(config["high"])
    a, tau, info = column_major(operands[0]), np.zeros(batch + (max(n - 1, 0),), dtype), infos(batch)
    size = optimal_workspace(name, dtype, lambda work, lwork: [integer(n), low, high, None, leading(m), None, work, lwork,
                                                               integer(0)], key=(n, m, config["low"], config["high"]))
    call(name, count_of(batch), [integer(n), low, high, PerMatrix(a), leading(m), PerMatrix(tau), workspace(size, dtype),
                                 integer(size), PerMatrix(info)])
    return [logical(a), tau, info]


def sytrd(operands, config, results):
    """The workspace query asks for the lower triangle whatever `uplo` is, as jaxlib's does."""
    batch, (m, n), dtype = batch_of(operands[0], 2), operands[0].shape[-2:], operands[0].dtype
    name = named("hetrd" if np.iscomplexobj(operands[0]) else "sytrd", dtype)
    a, info = column_major(operands[0]), infos(batch)
    diagonal, off_diagonal = np.zeros(batch + (n,), real_type(dtype)), np.zeros(batch + (max(n - 1, 0),), real_type(dtype))
    tau = np.zeros(results[3][0], dtype)
    size = optimal_workspace(name, dtype, lambda work, lwork: [character("L"), integer(n), None, leading(m), None, None, None,
                                                               work, lwork, integer(0)], key=(n, m))
    call(name, count_of(batch), [character(config["uplo"]), integer(n), PerMatrix(a), leading(m), PerMatrix(diagonal),
                                 PerMatrix(off_diagonal), PerMatrix(tau), workspace(size, dtype), integer(size),
                                 PerMatrix(info)])
    return [logical(a), diagonal, off_diagonal, tau, info]


def trsm(operands, config, results):
    """BLAS's trsm with alpha = 1: the triangular operand first, the right-hand sides,
    overwritten, second."""
    triangular, b = operands
    batch, (m, n), dtype = batch_of(b, 2), b.shape[-2:], b.dtype
    a, solution = column_major(triangular), column_major(b)
    letters = [character(config[name]) for name in ("side", "uplo", "trans_x", "diag")]
    call(named("trsm", dtype), count_of(batch), letters + [integer(m), integer(n), np.ones(1, dtype), PerMatrix(a),
                                                            leading(m if config["side"] == "L" else n), PerMatrix(solution),
                                                            leading(m)])
    return [logical(solution)]


def gtsv(operands, config, results):
    """jaxlib's gtsv: jax's sub-diagonal starts with a padding zero (dl[0]), so LAPACK gets
    dl + 1; the factorization overwrites the three diagonals in place, as in jaxlib."""
    dl, d, du = (np.array(diagonal, order="C") for diagonal in operands[:3])
    batch, (m, n) = batch_of(operands[3], 2), operands[3].shape[-2:]
    b, info = column_major(operands[3]), infos(batch)
    call(named("gtsv", b.dtype), count_of(batch), [integer(m), integer(n), PerMatrix(dl, offset=1), PerMatrix(d),
                                                   PerMatrix(du), PerMatrix(b), leading(m), PerMatrix(info)])
    return [dl, d, du, logical(b), info]


def tridiagonal_solve_perturbed(operands, config, results):
    return [tridiagonal_solve.solve_perturbed(*operands)]


ROUTINES = {"potrf": potrf, "getrf": getrf, "geqrf": geqrf, "geqp3": geqp3, "orgqr": orgqr, "ormqr": ormqr,
            "syevd": syevd, "gesdd": gesdd, "gesvd": gesvd, "geev": geev, "gees": gees, "gehrd": gehrd,
            "sytrd": sytrd, "trsm": trsm, "gtsv": gtsv, "tridiagonal_solve_perturbed": tridiagonal_solve_perturbed}
