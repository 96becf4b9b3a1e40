"""JAX on mlirxla through the PJRT plugin vs JAX's own CPU backend and vs mlirxla called
directly, side by side in one process.

1. Dispatch: a jitted 4-element f32 add, arguments already on the device, median of
   --calls single calls (each waits for its result) on the mlirxla device and on the cpu
   device, calls alternating; the ratio plugin / cpu (bar: at most 3x).
2. Eager code: short programs of everyday jax run op by op, without `jax.jit` (each op
   a dispatch of a program of one or two kernels), on an f32[8, 16] array on the mlirxla
   device and on the cpu device, medians of --repeats runs taken in turns; the ratio
   plugin / cpu and whether the results agree.
3. The workloads of cpu_vs_xla.py through `jax.jit` on the mlirxla device vs the same
   program compiled and executed by mlirxla's runtime directly (`Client.compile`,
   `execute_numpy`), medians of --repeats runs taken in turns; the ratio plugin / direct
   (bar: within 10%) and whether the plugin's outputs equal the direct ones.

    python benchmarks/jax_plugin_overhead.py [--workloads matmul,mlp] [--repeats 10] [--calls 1000] [--json]

Needs the jax extra and an installed mlirxla (the plugin library is built by `pip install`).
"""

import argparse
import json
import os
import statistics
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_vs_xla import WORKLOADS, add, medians, named_workload, timed  # noqa: E402

from mlirxla.runtime.client import Client  # noqa: E402


def jitted_side(function, arguments, device):
    """A zero-argument runner of `function` jitted on `device`, its inputs already there."""
    with jax.default_device(device):
        jitted = jax.jit(function)
        on_device = jax.device_put(arguments, device)
        jax.block_until_ready(jitted(*on_device))
    return lambda: jax.block_until_ready(jitted(*on_device))


def dispatch(calls: int, generator) -> dict:
    arguments = tuple((0.1 * generator.standard_normal(4)).astype(np.float32) for _ in range(2))
    sides = {"plugin": jitted_side(add, arguments, jax.devices("mlirxla")[0]),
             "cpu": jitted_side(add, arguments, jax.devices("cpu")[0])}
    times = {name: [] for name in sides}
    for _ in range(calls):
        for name, run in sides.items():
            times[name].append(timed(run))
    plugin, cpu = statistics.median(times["plugin"]), statistics.median(times["cpu"])
    return {"plugin_us": plugin * 1e6, "cpu_us": cpu * 1e6, "ratio": plugin / cpu}


def eager_elementwise(x):
    for _ in range(50):
        x = x * 0.9 + jnp.sin(x)
    return x


def eager_reductions(x):
    total = 0.0
    for _ in range(50):
        total = total + jnp.sum(x * x) / x.size
    return total


def eager_mlp(x):
    w = jnp.full((x.shape[1], x.shape[1]), 0.01, x.dtype)
    for _ in range(20):
        x = jax.nn.relu(x @ w + 1.0)
    return x


def eager_updates(x):
    for i in range(30):
        x = x.at[i % x.shape[0]].set(x[(i + 1) % x.shape[0]] * 2)
    return x


def eager_softmax(x):
    for _ in range(30):
        x = jax.nn.softmax(x, axis=-1)
    return x


EAGER_PROGRAMS = {"elementwise": eager_elementwise, "reductions": eager_reductions, "mlp": eager_mlp,
                  "updates": eager_updates, "softmax": eager_softmax}


def eager(name: str, repeats: int, generator) -> dict:
    argument = generator.standard_normal((8, 16)).astype(np.float32)
    sides, results = {}, {}
    for side in ("plugin", "cpu"):
        device = jax.devices("mlirxla" if side == "plugin" else "cpu")[0]
        x = jax.device_put(argument, device)

        def run(x=x, device=device):
            with jax.default_device(device):
                return jax.block_until_ready(EAGER_PROGRAMS[name](x))
        sides[side] = run
        results[side] = np.asarray(run())
    seconds = medians(sides, repeats)
    return {"program": name, "plugin_ms": seconds["plugin"] * 1e3, "cpu_ms": seconds["cpu"] * 1e3,
            "ratio": seconds["plugin"] / seconds["cpu"], "same": bool(np.allclose(results["plugin"], results["cpu"], rtol=1e-4, atol=1e-5))}


def workload(name: str, repeats: int, generator) -> dict:
    function = named_workload(name).function
    arguments = named_workload(name).random_arguments(generator)
    leaves = jax.tree_util.tree_leaves(arguments)
    executable = Client().compile(jax.jit(function, keep_unused=True).lower(*arguments).as_text())
    plugin = jitted_side(function, arguments, jax.devices("mlirxla")[0])
    direct = lambda: executable.execute_numpy(leaves)
    got = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(plugin())]
    same = all(np.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(got, direct()))
    seconds = medians({"plugin": plugin, "direct": direct}, repeats)
    return {"workload": name, "plugin_ms": seconds["plugin"] * 1e3, "direct_ms": seconds["direct"] * 1e3,
            "ratio": seconds["plugin"] / seconds["direct"], "same": same}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(workload.name for workload in WORKLOADS))
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--json", action="store_true", help="end with one JSON line of all figures")
    options = parser.parse_args()
    unknown = sorted(set(options.workloads.split(",")) - {workload.name for workload in WORKLOADS})
    if unknown:
        parser.error(f"unknown workloads {','.join(unknown)} (known: {','.join(workload.name for workload in WORKLOADS)})")
    generator = np.random.default_rng(0)
    overhead = dispatch(options.calls, generator)
    print(f"dispatch (f32[4] add, median of {options.calls} calls): plugin {overhead['plugin_us']:.1f} us, "
          f"jax cpu {overhead['cpu_us']:.1f} us, ratio {overhead['ratio']:.2f}x")
    eager_rows = [eager(name, options.repeats, generator) for name in EAGER_PROGRAMS]
    print(f"{'eager':12} {'plugin ms':>10} {'cpu ms':>10} {'ratio':>7} {'same':>5}")
    for row in eager_rows:
        print(f"{row['program']:12} {row['plugin_ms']:10.3f} {row['cpu_ms']:10.3f} {row['ratio']:6.2f}x {'yes' if row['same'] else 'NO':>5}")
    rows = [workload(name, options.repeats, generator) for name in options.workloads.split(",")]
    print(f"{'workload':12} {'plugin ms':>10} {'direct ms':>10} {'ratio':>7} {'same':>5}")
    for row in rows:
        print(f"{row['workload']:12} {row['plugin_ms']:10.2f} {row['direct_ms']:10.2f} {row['ratio']:6.2f}x {'yes' if row['same'] else 'NO':>5}")
    if options.json:
        print(json.dumps({"dispatch": overhead, "eager": eager_rows, "rows": rows}))


if __name__ == "__main__":
    main()
