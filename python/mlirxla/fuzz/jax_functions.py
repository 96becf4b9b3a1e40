"""Random JAX functions through the plugin against jax's own cpu backend, drawn from a seed.

A function is a chain of jax.numpy / lax operations on one or two random arrays (elementwise
math, reductions, matmuls, indexing and updates, cumulative sums, sorts, `where`, control flow
with `fori_loop` and `cond`, `vmap` and `grad` over part of the chain); it is jitted on the
`mlirxla` device and on the `cpu` device of the same process and the results compared, floats
within a tolerance of their precision. Each seed runs in a worker process (the differential
fuzzer's `Worker`), so that a crash costs one seed.
"""

import random

import numpy as np

OPERATIONS = [
    "exp", "tanh", "sin", "log1p_abs", "sqrt_abs", "square", "negate", "relu", "softmax", "sum", "mean", "max", "cumsum",
    "matmul", "transpose", "reverse", "take", "at_add", "sort", "where", "fori_loop", "cond", "vmap_norm", "grad_square",
    "astype_int_and_back", "clip", "argmax_take", "concatenate", "pad", "dynamic_slice",
]


def build(seed: int):
    """(function, arguments, float tolerance) for `seed`."""
    import jax
    import jax.numpy as jnp

    rng = random.Random(seed)
    data = np.random.default_rng(seed)
    shape = tuple(rng.choice([1, 2, 3, 4, 5, 8]) for _ in range(rng.choice([1, 2, 2, 3])))
    dtype = rng.choice([np.float32, np.float32, np.float64 if jax.config.jax_enable_x64 else np.float32, np.int32])
    x = (data.standard_normal(shape) * 3).astype(dtype)
    steps = [rng.choice(OPERATIONS) for _ in range(rng.randint(2, 6))]

    def step(name, v):
        floating = jnp.issubdtype(v.dtype, jnp.floating)
        f = v if floating else v.astype(jnp.float32)
        if name == "exp":
            return jnp.exp(jnp.clip(f, -5, 5))
        if name == "tanh":
            return jnp.tanh(f)
        if name == "sin":
            return jnp.sin(f)
        if name == "log1p_abs":
            return jnp.log1p(jnp.abs(f))
        if name == "sqrt_abs":
            return jnp.sqrt(jnp.abs(f))
        if name == "square":
            return v * v
        if name == "negate":
            return -v
        if name == "relu":
            return jax.nn.relu(f)
        if name == "softmax":
            return jax.nn.softmax(f, axis=-1)
        if name == "sum":
            return jnp.sum(v, axis=-1, keepdims=True)
        if name == "mean":
            return jnp.mean(f, axis=0)
        if name == "max":
            return jnp.max(v, axis=-1)
        if name == "cumsum":
            return jnp.cumsum(v, axis=-1)
        if name == "matmul":
            return v @ jnp.swapaxes(v, -1, -2) if v.ndim >= 2 else v * v.sum()
        if name == "transpose":
            return v.T
        if name == "reverse":
            return v[::-1]
        if name == "take":
            return jnp.take(v, jnp.arange(v.shape[0])[::-1] % max(v.shape[0], 1), axis=0)
        if name == "at_add":
            return v.at[jnp.array([0, 0, v.shape[0] - 1])].add(v[0])
        if name == "sort":
            return jnp.sort(v, axis=-1)
        if name == "where":
            return jnp.where(v > 0, v, v * 2)
        if name == "fori_loop":
            return jax.lax.fori_loop(0, 3, lambda i, c: c * 0.5 + 1 if floating else c + i, v)
        if name == "cond":
            return jax.lax.cond(jnp.sum(f) > 0, lambda c: c + 1, lambda c: c - 1, v)
        if name == "vmap_norm":
            return jax.vmap(lambda row: row / (jnp.linalg.norm(row) + 1))(jnp.atleast_2d(f))
        if name == "grad_square":
            return jax.grad(lambda c: jnp.sum(jnp.tanh(c) ** 2))(f)
        if name == "astype_int_and_back":
            return jnp.clip(f, -100, 100).astype(jnp.int32).astype(f.dtype)
        if name == "clip":
            return jnp.clip(v, -1, 1)
        if name == "argmax_take":
            return jnp.take(jnp.ravel(v), jnp.argmax(jnp.ravel(v)))[None]
        if name == "concatenate":
            return jnp.concatenate([v, v * 2], axis=0)
        if name == "pad":
            return jnp.pad(v, [(1, 0)] * v.ndim)
        return jax.lax.dynamic_slice_in_dim(v, jnp.int32(1) % max(v.shape[0], 1), min(2, v.shape[0]), axis=0)

    def function(argument):
        value = argument
        for name in steps:
            value = step(name, value)
        return value

    tolerance = 1e-4 if dtype != np.float64 else 1e-10
    return function, [x], tolerance, steps


def compare(got, want, tolerance: float) -> str | None:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{got.dtype}{list(got.shape)}, cpu gives {want.dtype}{list(want.shape)}"
    if got.dtype.kind in "biu":
        return None if np.array_equal(got, want) else "integers differ"
    finite = np.isfinite(want)
    scale = max(1.0, float(np.max(np.abs(want[finite])))) if finite.any() else 1.0
    if np.allclose(got, want, rtol=tolerance, atol=tolerance * scale, equal_nan=True):
        return None
    return f"max abs difference {float(np.nanmax(np.abs(got.astype(np.float64) - want.astype(np.float64)))):.3g}"


def check_seed(seed: int) -> tuple[str, str]:
    """(status, detail): ok, mismatch, or plugin-error when mlirxla fails what cpu runs."""
    import jax

    function, arguments, tolerance, steps = build(seed)
    results = {}
    for platform in ("cpu", "mlirxla"):
        with jax.default_device(jax.devices(platform)[0]):
            try:
                results[platform] = np.asarray(jax.jit(function)(*arguments))
            except Exception as error:  # noqa: BLE001 - either side's failure is reported
                results[platform] = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    recipe = " -> ".join(steps)
    if isinstance(results["cpu"], str):
        return "cpu-refused", f"{recipe}: {results['cpu']}"
    if isinstance(results["mlirxla"], str):
        return "plugin-error", f"{recipe}: {results['mlirxla']}"
    why = compare(results["mlirxla"], results["cpu"], tolerance)
    return ("mismatch", f"{recipe}: {why}") if why else ("ok", recipe)
