"""Library calls that run on the host with numpy: the ops XLA:CPU hands to runtime libraries
instead of generating code (its sort, FFT, triangular-solve and Cholesky runtime functions).

Each call reads its operands from the buffers as numpy views (no copy), computes with
numpy, and writes its results into the result buffers. The attributes a call needs are plain
data (JSON), so host calls are cached and dumped like any thunk.

- `sort`: stable, along one dimension, lexicographically by keys (operands, or the real or
  imaginary part of complex ones), each ascending or descending, floats in IEEE total order
  or with -0.0 = +0.0 and one greatest NaN (`transforms/sort_comparator.py` reads the keys
  off the comparator); every operand follows the permutation. When the program reads only
  the first `leading` positions of each row (a top-k: sort then slice), a one-key sort
  selects those first and sorts only them, and writes only them.
- `fft`: FFT, IFFT, RFFT, IRFFT over the trailing `fft_length` dimensions (scipy's pocketfft).
- `triangular_solve`: op(a) x = b or x op(a) = b for triangular a, with unit diagonals,
  transposes and adjoints, batched over leading dimensions.
- `cholesky`: the lower (or upper) factor of a batch of positive definite matrices; a matrix
  that is not positive definite gives NaNs, as XLA's does.
- `householder_qr`, `householder_product`: XLA's `Qr` and
  `ProductOfElementaryHouseholderReflectors` custom calls (jax's QR on platforms without
  LAPACK calls): LAPACK's geqrf and orgqr forms.
- `lapack_ffi`: jax's cpu LAPACK custom calls (`lapack_ssyevd_ffi`, ...), the same LAPACK
  routines jaxlib calls, by one native loop over the batch, and its perturbed tridiagonal
  solve (`runtime/lapack_ffi.py`, `runtime/lapack_batches.py`, `runtime/tridiagonal_solve.py`).
- `scatter`: one input and one update tensor combined by set, add, multiply, max, min, or,
  and (the combiners JAX emits), as the spec defines it, the target of every update
  element computed at once with numpy and the combiner applied in the updates' order
  (element by element only for or/and).
- `dce_sink`: nothing (`lax.dce_sink` keeps its operand computed).
- `print`: the operands on stdout, each as its type and its elements, one print at a time
  (the interpreter tests' `interpreter.print`).
- `python_callback`: a Python function the program calls (`jax.debug.print`,
  `jax.pure_callback`, `io_callback`), on copies of its operands, its results checked
  against the declared shapes and dtypes (`runtime/callbacks.py`).
- `interpret`: a kernel the toolkit cannot lower, run by the StableHLO reference interpreter
  (`backends/cpu/interpreter_fallback.py`).
"""

import threading

import numpy as np

from mlirxla.errors import MlirxlaError, first_line

from . import callbacks, lapack_ffi, threads


def sortable(values: np.ndarray, key: dict) -> np.ndarray:
    """Integers whose order is the key's order (descending keys reversed)."""
    if key["part"] != "value":
        values = values.real if key["part"] == "real" else values.imag
    if values.dtype.kind == "b":
        values = values.astype(np.uint8)
    if values.dtype.kind == "f" or values.dtype.name == "bfloat16":
        if key["canonical"]:
            values = np.where(values == 0, np.zeros_like(values), values)
            values = np.where(np.isnan(values), np.full_like(values, np.nan), values)
        bits = values.view(np.dtype(f"i{values.dtype.itemsize}"))
        magnitude = np.array(np.iinfo(bits.dtype).max, bits.dtype)
        values = bits ^ ((bits >> (8 * bits.dtype.itemsize - 1)) & magnitude)  # IEEE total order as a signed integer
    return ~values if key["descending"] else values  # ~ reverses integer order without overflow


PARTIAL_SORT_SHARE = 4  # a sort whose users read at most 1/4 of each row selects that much first


def sort(operands: list[np.ndarray], attributes: dict) -> list[np.ndarray]:
    dimension = attributes["dimension"]
    keys = [sortable(operands[key["operand"]], key) for key in attributes["keys"]]
    leading = attributes.get("leading")
    size = operands[0].shape[dimension]
    if leading is not None and len(keys) == 1 and leading * PARTIAL_SORT_SHARE <= size and keys[0].dtype.itemsize <= 4:
        order = leading_order(keys[0], leading, dimension)
    else:
        order = np.lexsort(keys[::-1], axis=dimension)
    return [np.take_along_axis(operand, order, axis=dimension) for operand in operands]


def leading_order(key: np.ndarray, leading: int, dimension: int) -> np.ndarray:
    """The first `leading` positions of the stable sort's permutation along `dimension` (a
    top-k): each key paired with its position in one int64, unique, so selecting the
    `leading` smallest (np.argpartition, linear) and sorting only those gives exactly what the
    stable sort's first positions are."""
    wide = key.astype(np.int64)
    if key.dtype.kind == "u" and key.dtype.itemsize == 4:
        wide -= 1 << 31  # into the signed range, so that the shift below cannot overflow
    shape = [1] * key.ndim
    shape[dimension] = key.shape[dimension]
    paired = (wide << 32) | np.arange(key.shape[dimension], dtype=np.int64).reshape(shape)
    chosen = np.take_along_axis(paired, np.argpartition(paired, leading - 1, axis=dimension), axis=dimension)
    chosen = np.sort(np.take(chosen, np.arange(leading), axis=dimension), axis=dimension)
    return chosen & 0xFFFFFFFF


FFT_THREADS_FROM = 1 << 18  # elements: a smaller transform runs on the calling thread


def fft(operands: list[np.ndarray], attributes: dict) -> list[np.ndarray]:
    """scipy's pocketfft, which transforms several rows at once in the lanes of a vector
    (numpy's takes one row at a time: an f32 rfft of 256 rows of 4096 was 3-6x slower), over
    the runtime's threads from `FFT_THREADS_FROM` elements (pocketfft's hand-off to a second
    thread took 70 us: a complex 16 x 16 FFT 17 us on one thread, 86 on two; 64 x 4096, 0.97
    and 0.87 ms; 1024 x 1024, 5.0 and 4.2 ms); f32 and complex64 stay single precision, as
    XLA's DUCC FFT."""
    import scipy.fft

    kind, lengths = attributes["fft_type"], attributes["fft_length"]
    axes = tuple(range(-len(lengths), 0))
    x = operands[0]
    workers = threads.cpu_threads() if x.size >= FFT_THREADS_FROM else 1
    if kind == "FFT":
        return [scipy.fft.fftn(x, axes=axes, workers=workers)]
    if kind == "IFFT":
        return [scipy.fft.ifftn(x, axes=axes, workers=workers)]
    if kind == "RFFT":
        return [scipy.fft.rfftn(x, s=lengths, axes=axes, workers=workers)]
    if kind == "IRFFT":
        return [scipy.fft.irfftn(x, s=lengths, axes=axes, workers=workers)]
    raise MlirxlaError(f"unknown fft_type {kind}")


def triangular_solve(operands: list[np.ndarray], attributes: dict) -> list[np.ndarray]:
    a, b = operands
    lower, unit = attributes["lower"], attributes["unit_diagonal"]
    a = np.tril(a) if lower else np.triu(a)
    if unit:
        a = a.copy()
        diagonal = np.arange(a.shape[-1])
        a[..., diagonal, diagonal] = 1
    transpose = attributes["transpose_a"]
    if transpose in ("TRANSPOSE", "ADJOINT"):
        a = np.swapaxes(a, -1, -2)
        lower = not lower
        if transpose == "ADJOINT":
            a = np.conj(a)
    if attributes["left_side"]:
        return [triangular(a, b, lower)]
    # x a = b  <=>  a^T x^T = b^T
    return [np.swapaxes(triangular(np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2), not lower), -1, -2)]


def triangular(a: np.ndarray, b: np.ndarray, lower: bool) -> np.ndarray:
    """x with a x = b, a triangular (lower or upper): LAPACK's solve, or for a singular a,
    substitution row by row, whose divisions by a zero diagonal give infinities and NaNs as
    XLA's trsm does (LAPACK refuses the matrix)."""
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        pass
    x = np.zeros(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + b.shape[-2:], np.result_type(a, b))
    rows = range(a.shape[-1]) if lower else reversed(range(a.shape[-1]))
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in rows:
            solved = slice(0, i) if lower else slice(i + 1, None)
            known = np.einsum("...k,...km->...m", a[..., i, solved], x[..., solved, :])
            x[..., i, :] = (b[..., i, :] - known) / a[..., i, i, None]
    return x


def cholesky(operands: list[np.ndarray], attributes: dict) -> list[np.ndarray]:
    a = operands[0]
    batch = a.reshape((-1,) + a.shape[-2:])
    factors = np.full_like(batch, np.nan)
    for index, matrix in enumerate(batch):
        try:
            factors[index] = np.linalg.cholesky(matrix if attributes["lower"] else np.conj(matrix.T))
        except np.linalg.LinAlgError:
            continue  # not positive definite: NaNs
        if not attributes["lower"]:
            factors[index] = np.conj(factors[index].T)
    return [factors.reshape(a.shape)]


def householder_qr(operands: list[np.ndarray], attributes: dict) -> list[np.ndarray]:
    """XLA's `Qr` custom call (LAPACK geqrf): R above the diagonal, the Householder vectors
    below it, and their scales, over a batch of matrices."""
    reflectors, scales = np.linalg.qr(operands[0], mode="raw")
    return [np.ascontiguousarray(np.swapaxes(reflectors, -1, -2)), scales]


def householder_product(operands: list[np.ndarray], attributes: dict) -> list[np.ndarray]:
    """XLA's `ProductOfElementaryHouseholderReflectors` (LAPACK orgqr/ungqr): the first n
    columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^H with v_i = e_i + the part of column i of
    the reflectors below the diagonal."""
    reflectors, scales = operands
    m, n = reflectors.shape[-2:]
    product = np.broadcast_to(np.eye(m, n, dtype=reflectors.dtype), reflectors.shape).copy()
    rows = np.arange(m)
    for i in reversed(range(scales.shape[-1])):
        v = np.where(rows > i, reflectors[..., :, i], 0).astype(reflectors.dtype)
        v[..., i] = 1
        projection = np.einsum("...m,...mn->...n", v.conj(), product)
        product -= scales[..., i, None, None] * v[..., :, None] * projection[..., None, :]
    return [product]


COMBINERS = {
    "set": lambda old, new: new,
    "add": lambda old, new: old + new,
    "multiply": lambda old, new: old * new,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "or": np.logical_or,
    "and": np.logical_and,
}


# combiners applied at repeated targets one update after another, in the updates' order
UNBUFFERED = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum}


def scatter(operands: list[np.ndarray], attributes: dict) -> list[np.ndarray]:
    """StableHLO scatter of one input by one update tensor (with batching dimensions), the
    spec's loop over every update element done on all of them at once: every element's
    target index computed as arrays, windows that start out of bounds skipped, then the
    combiner applied in the updates' order (`ufunc.at`, which applies repeated targets one
    after another, as the loop did)."""
    result, indices, updates = operands[0].copy(), operands[1], operands[2]
    numbers = attributes["dimension_numbers"]
    window_dims = numbers.get("update_window_dims", [])
    inserted = numbers.get("inserted_window_dims", [])
    to_operand = numbers.get("scatter_dims_to_operand_dims", [])
    index_vector_dim = numbers.get("index_vector_dim", indices.ndim)
    input_batching = numbers.get("input_batching_dims", [])
    indices_batching = numbers.get("scatter_indices_batching_dims", [])
    if index_vector_dim == indices.ndim:
        indices = indices[..., np.newaxis]
    # the index vector last, the other index dimensions in order: the scatter dimensions' order
    index_vectors = np.moveaxis(indices, index_vector_dim, -1)
    scatter_dims = [d for d in range(updates.ndim) if d not in window_dims]
    window_operand_dims = [d for d in range(result.ndim) if d not in inserted and d not in input_batching]
    window_bounds = [updates.shape[d] for d in window_dims]
    update_index = np.indices(updates.shape).reshape(updates.ndim, updates.size)
    scatter_index = [update_index[d] for d in scatter_dims]
    # each update element's index vector (one vector for all when there are no scatter dimensions)
    vectors = index_vectors[tuple(scatter_index)] if scatter_index else np.broadcast_to(index_vectors, (updates.size, index_vectors.shape[-1]))
    start = vectors.reshape(updates.size, index_vectors.shape[-1]).astype(np.int64)
    full = np.zeros((result.ndim, updates.size), np.int64)
    for k, operand_dim in enumerate(to_operand):
        full[operand_dim] = start[:, k]
    for batch_input, batch_index in zip(input_batching, indices_batching):
        position = batch_index if batch_index < index_vector_dim else batch_index - 1
        full[batch_input] = scatter_index[position]
    target = full.copy()
    for operand_dim, update_dim in zip(window_operand_dims, window_dims):
        target[operand_dim] += update_index[update_dim]
    valid = np.ones(updates.size, bool)
    for d in range(result.ndim):
        extent = window_bounds[window_operand_dims.index(d)] if d in window_operand_dims else 1
        valid &= (full[d] >= 0) & (full[d] <= result.shape[d] - extent) & (target[d] >= 0) & (target[d] < result.shape[d])
    where = tuple(target[:, valid])
    values = updates.reshape(-1)[valid]
    combiner = attributes["combiner"]
    if combiner == "set":
        result[where] = values
    elif combiner in UNBUFFERED:
        UNBUFFERED[combiner].at(result, where, values)
    else:
        combine = COMBINERS[combiner]
        for position, value in zip(zip(*where), values):
            result[position] = combine(result[position], value)
    return [result]


_INTERPRETER = threading.Lock()
_PARSED: dict = {}


def interpret(operands: list[np.ndarray], attributes: dict) -> list[np.ndarray]:
    """A program (the reference backend's) or a kernel the toolkit cannot lower (the cpu
    backend's), evaluated by the StableHLO reference interpreter (`@main` of the module text
    in the attributes); in a child process when integer division could kill this one. One at
    a time: the interpreter's context is shared."""
    from mlirxla.context import new_context
    from mlirxla.mlir import ir, stablehlo

    from . import isolated, literals

    text = attributes["module"]
    with _INTERPRETER:
        if text not in _PARSED:
            parsed = ir.Module.parse(text, new_context())
            _PARSED[text] = (parsed, isolated.may_crash(parsed))
        module, may_crash = _PARSED[text]
        with module.context:
            main = next(op for op in module.body.operations if op.operation.name == "func.func")
            types = list(ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value).inputs)
            inputs = [literals.to_attribute(array, value_type) for array, value_type in zip(operands, types)]
            if may_crash:
                values = isolated.evaluate_in_child(module, inputs)
            else:
                try:
                    values = stablehlo.eval_module(module, inputs)
                except Exception as error:  # noqa: BLE001 - the interpreter raises bare RuntimeErrors
                    raise MlirxlaError(f"the reference interpreter failed: {first_line(error)}") from None
            return [literals.to_numpy(value) for value in values]


def dce_sink(operands: list[np.ndarray], attributes: dict) -> list[np.ndarray]:
    return []


EFFECT_ORDER_MARK = np.ones(1, np.uint8)
_PRINT_LOCK = threading.Lock()


def print_values(operands: list[np.ndarray], attributes: dict) -> list[np.ndarray]:
    with _PRINT_LOCK:
        for operand, value_type in zip(operands, attributes["types"]):
            print(f"{value_type} {{\n  {np.array2string(operand, separator=', ')}\n}}", flush=True)
    return [EFFECT_ORDER_MARK]


def python_callback(operands: list[np.ndarray], attributes: dict) -> list[np.ndarray]:
    """The callback's results, checked against the shapes and dtypes the program declares;
    it gets copies of its operands, as it may keep them past this execution. A callback with
    a side effect also writes the byte that keeps effects in program order (the cpu
    backend's thunk emitter gives it that last result)."""
    declared = [callbacks.ResultSpec(tuple(shape), dtype) for shape, dtype in attributes["results"]]
    values = callbacks.call(attributes["callback"], [operand.copy() for operand in operands], declared)
    return values + [EFFECT_ORDER_MARK] if attributes["effect"] else values


CALLS = {"sort": sort, "fft": fft, "triangular_solve": triangular_solve, "cholesky": cholesky,
         "householder_qr": householder_qr, "householder_product": householder_product, "lapack_ffi": lapack_ffi.run,
         "scatter": scatter, "dce_sink": dce_sink, "print": print_values, "python_callback": python_callback,
         "interpret": interpret}
