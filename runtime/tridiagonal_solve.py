"""jax's tridiagonal solve with `perturb_singular` on the host (jaxlib's
`tridiagonal_solve_perturbed_ffi`; without perturbation jax's cpu lowering calls LAPACK's gtsv,
`runtime/lapack_ffi.py`).

A x = b for a batch of tridiagonal A given by three diagonals of length m, `dl` (below, its
first element unused), `d` and `du` (above, its last element unused), and b of m rows and
any number of columns: gtsv's Gaussian elimination with partial pivoting, and pivots of the
back substitution that are too small for the solution to stay finite moved away from zero by
multiples of eps * max|U| (doubling until the quotient cannot overflow), or scaled up with the
row when they underflow: the scheme of jaxlib's `tridiagonal_solve_perturbed` (from
TensorFlow), which inverse iteration in jax's `eigh_tridiagonal` relies on to get finite
vectors out of singular shifted matrices. Each step works on one row of every right-hand side
at once.
"""

import numpy as np


def solve_perturbed(dl: np.ndarray, d: np.ndarray, du: np.ndarray, b: np.ndarray) -> np.ndarray:
    x = np.empty_like(b)
    for index in np.ndindex(*b.shape[:-2]):
        x[index] = perturbed(dl[index], d[index], du[index], b[index])
    return x


def perturbed(dl: np.ndarray, d: np.ndarray, du: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elimination with row exchanges into U (diagonal and two superdiagonals) and P b, then
    back substitution with `safe_pivot`."""
    n = d.shape[0]
    real = np.finfo(d.dtype).dtype.type
    eps = np.finfo(real).eps
    if n == 0:
        return b.copy()
    if n == 1:
        pivot, row = safe_pivot(eps * abs(d[0]), d[0], b[0].copy())
        return (row / pivot)[None]
    u = np.zeros((n, 3), d.dtype)
    x = b.copy()
    u[0, 0], u[0, 1] = d[0], du[0]
    max_abs_u = max(abs(u[0, 0]), abs(u[0, 1]))
    scale = abs(u[0, 0]) + abs(u[0, 1])
    for k in range(n - 1):
        below = dl[k + 1]
        u[k + 1, 0] = d[k + 1]
        next_scale = abs(below) + abs(u[k + 1, 0]) + (abs(du[k + 1]) if k < n - 2 else real(0))
        if below == 0:
            scale = next_scale
            u[k + 1, 1], u[k, 2] = du[k + 1], 0
        elif abs(below) / next_scale <= (real(0) if u[k, 0] == 0 else abs(u[k, 0]) / scale):
            scale = next_scale
            factor = below / u[k, 0]
            u[k + 1, 0] -= factor * u[k, 1]
            u[k + 1, 1], u[k, 2] = du[k + 1], 0
            x[k + 1] = b[k + 1] - factor * x[k]
        else:  # row k + 1 becomes the pivot row
            factor = u[k, 0] / below
            above = u[k, 1]
            u[k, 0] = below
            u[k + 1, 0] = above - factor * d[k + 1]
            u[k, 1] = d[k + 1]
            if k < n - 2:
                u[k, 2] = du[k + 1]
                u[k + 1, 1] = -factor * du[k + 1]
            x[k + 1] = x[k] - factor * b[k + 1]
            x[k] = b[k + 1]
            scale = abs(u[k + 1, 0]) + abs(u[k + 1, 1])
        if k < n - 2:
            max_abs_u = max(max_abs_u, *np.abs(u[k]))
    max_abs_u = max(max_abs_u, abs(u[n - 1, 0]))
    perturb = real(eps * max_abs_u)
    for k in range(n - 1, -1, -1):
        row = x[k] - (u[k, 1] * x[k + 1] if k + 1 < n else 0) - (u[k, 2] * x[k + 2] if k + 2 < n else 0)
        pivot, row = safe_pivot(perturb, u[k, 0], row)
        x[k] = row * (1 / pivot)
    return x


def safe_pivot(perturb, pivot, row: np.ndarray):
    """A pivot of magnitude below one that the row's largest element divided by it would
    overflow (or that is zero) moves away from zero by `perturb`, doubled each time; one too
    small to divide by safely is scaled up together with its row (LAPACK's safe minimum)."""
    real = np.finfo(row.dtype).dtype.type
    finfo = np.finfo(real)
    small = real(1) / finfo.max
    safe_minimum = finfo.tiny if small < finfo.tiny else small * (real(1) + finfo.eps)
    big = real(1) / safe_minimum
    magnitude = abs(pivot)
    if magnitude >= 1:
        return pivot, row
    perturb = np.copysign(max(abs(perturb), safe_minimum), pivot.real)
    largest = np.abs(row).max() if row.size else real(0)
    while magnitude < 1:
        if magnitude < safe_minimum and magnitude != 0 and largest * safe_minimum <= magnitude:
            return pivot * big, row * big
        if magnitude < safe_minimum or largest > magnitude * big:
            pivot, perturb = pivot + perturb, perturb * 2
        else:
            return pivot, row
        magnitude = abs(pivot)
    return pivot, row
