"""jax's linear algebra on batches of matrices: jax's cpu backend vs mlirxla through the PJRT
plugin, both running jaxlib's LAPACK custom calls (`lapack_*_ffi`), side by side in one process.

For each function (eigh, qr, cholesky, lu, svd, inv, solve), shape (1000x8x8, 100x32x32,
1x512x512 by default) and element type (f32, f64), the same jitted function on the cpu device
and on the mlirxla device, inputs already there, runs taken in turns; the median of --repeats
runs of each, the ratio mlirxla / cpu, and whether the outputs are the same bits.

    python benchmarks/lapack_batches.py [--functions eigh,qr] [--shapes 1000x8x8] [--dtypes float32] [--repeats 15] [--json]

Needs the jax extra and an installed mlirxla (the plugin library is built by `pip install`).
"""

import argparse
import json
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np


def symmetric(rng, shape, dtype):
    a = rng.standard_normal(shape)
    return (a + np.swapaxes(a, -1, -2)).astype(dtype)


def positive_definite(rng, shape, dtype):
    a = rng.standard_normal(shape)
    return (a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def general(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def right_hand_side(rng, shape, dtype):
    return [general(rng, shape, dtype), general(rng, shape[:-1] + (1,), dtype)]


# name -> (function, its arguments for a shape and dtype)
FUNCTIONS = {
    "eigh": (jnp.linalg.eigh, lambda rng, shape, dtype: [symmetric(rng, shape, dtype)]),
    "qr": (jnp.linalg.qr, lambda rng, shape, dtype: [general(rng, shape, dtype)]),
    "cholesky": (jnp.linalg.cholesky, lambda rng, shape, dtype: [positive_definite(rng, shape, dtype)]),
    "lu": (jax.scipy.linalg.lu_factor, lambda rng, shape, dtype: [general(rng, shape, dtype)]),
    "svd": (jnp.linalg.svd, lambda rng, shape, dtype: [general(rng, shape, dtype)]),
    "inv": (jnp.linalg.inv, lambda rng, shape, dtype: [general(rng, shape, dtype)]),
    "solve": (jnp.linalg.solve, right_hand_side),
}


def runner(function, arguments, device):
    """A zero-argument runner of `function` jitted on `device`, its inputs already there, and
    its outputs as numpy arrays."""
    with jax.default_device(device):
        jitted = jax.jit(function)
        on_device = jax.device_put(arguments, device)
        outputs = [np.asarray(leaf) for leaf in jax.tree.leaves(jitted(*on_device))]
    return (lambda: jax.block_until_ready(jitted(*on_device))), outputs


def timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def measure(name: str, shape: tuple, dtype: str, repeats: int, rng) -> dict:
    function, arguments_of = FUNCTIONS[name]
    arguments = arguments_of(rng, shape, np.dtype(dtype))
    cpu, expected = runner(function, arguments, jax.devices("cpu")[0])
    plugin, got = runner(function, arguments, jax.devices("mlirxla")[0])
    same = len(got) == len(expected) and all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got, expected))
    times = {"cpu": [], "mlirxla": []}
    for _ in range(repeats):
        times["cpu"].append(timed(cpu))
        times["mlirxla"].append(timed(plugin))
    cpu_ms, mlirxla_ms = (statistics.median(times[side]) * 1e3 for side in ("cpu", "mlirxla"))
    return {"function": name, "shape": "x".join(map(str, shape)), "dtype": dtype, "cpu_ms": cpu_ms,
            "mlirxla_ms": mlirxla_ms, "ratio": mlirxla_ms / cpu_ms, "same": same}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--functions", default=",".join(FUNCTIONS))
    parser.add_argument("--shapes", default="1000x8x8,100x32x32,1x512x512")
    parser.add_argument("--dtypes", default="float32,float64")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", action="store_true", help="end with one JSON line of all figures")
    options = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(0)
    shapes = [tuple(int(size) for size in shape.split("x")) for shape in options.shapes.split(",")]
    print(f"{'function':9} {'shape':>11} {'dtype':>8} {'cpu ms':>9} {'mlirxla ms':>11} {'ratio':>7} {'same':>5}", flush=True)
    rows = []
    for name in options.functions.split(","):
        for shape in shapes:
            for dtype in options.dtypes.split(","):
                row = measure(name, shape, dtype, options.repeats, rng)
                rows.append(row)
                print(f"{name:9} {row['shape']:>11} {dtype:>8} {row['cpu_ms']:9.3f} {row['mlirxla_ms']:11.3f} "
                      f"{row['ratio']:6.2f}x {'yes' if row['same'] else 'NO':>5}", flush=True)
    print(f"geomean ratio {np.exp(np.mean(np.log([row['ratio'] for row in rows]))):.2f}x over {len(rows)} rows")
    if options.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
