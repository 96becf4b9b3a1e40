"""Loops on mlirxla's CPU backend vs XLA:CPU, side by side in one process.

Programs whose time goes to control flow rather than to large kernels, where running the
loop from Python (a round trip per iteration) shows: a 64-step RNN `lax.scan`, a `fori_loop`
of 100 small updates, a `while_loop` whose trip count depends on the data (Collatz steps of
its argument), and a `lax.cond` inside a 64-step scan. Each is compiled by mlirxla from its
StableHLO (`Client.compile`, run through `execute_numpy`) and jitted on XLA:CPU; both sides
run --repeats times, taking turns in blocks each begun once the other side's threads have
gone to sleep (`cpu_vs_xla.medians`). Per program it prints the medians, their
ratio (mlirxla / XLA; below 1 is faster), whether the outputs match XLA's (rtol = atol =
1e-4), and which control flow the executable runs in a native driver (the thunk sequence's
"native driver" lines), then the geometric mean of the ratios.

    python benchmarks/loops_vs_xla.py [--programs rnn_scan,fori] [--repeats 200] [--json]
"""

import argparse
import json
import math
import os
import statistics
import sys
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np

from mlirxla.runtime.client import Client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_vs_xla import SETTLE_S, compare, medians  # noqa: E402

LOOP_BLOCK_RUNS = 20  # short runs: blocks of 20, so that the pauses between blocks stay few
TOLERANCE = SimpleNamespace(rtol=1e-4, atol=1e-4)  # f32 loops against XLA's, as cpu_vs_xla's f32 workloads


def rnn_scan(weights, recurrent, inputs):
    def step(hidden, x):
        hidden = jnp.tanh(x @ weights + hidden @ recurrent)
        return hidden, hidden

    final, hiddens = jax.lax.scan(step, jnp.zeros((inputs.shape[1], recurrent.shape[0]), inputs.dtype), inputs)
    return final, hiddens


def fori(x):
    return jax.lax.fori_loop(0, 100, lambda i, value: value * 0.99 + jnp.sin(value) * 0.01 + i * 1e-4, x)


def collatz(start):
    def step(state):
        value, steps = state
        return jnp.where(value % 2 == 0, value // 2, 3 * value + 1), steps + 1

    return jax.lax.while_loop(lambda state: state[0] != 1, step, (start, jnp.int32(0)))[1]


def cond_scan(x, xs):
    def step(carry, item):
        carry = jax.lax.cond(item.sum() > 0, lambda c: c + item, lambda c: c * 0.5, carry)
        return carry, carry.sum()

    return jax.lax.scan(step, x, xs)


def programs(generator) -> dict:
    """name -> (function, arguments)"""
    normal = lambda *shape: (0.1 * generator.standard_normal(shape)).astype(np.float32)
    return {
        "rnn_scan": (rnn_scan, (normal(32, 64), normal(64, 64), normal(64, 8, 32))),
        "fori": (fori, (normal(256),)),
        "collatz": (collatz, (np.int32(97),)),
        "cond_scan": (cond_scan, (normal(16), normal(64, 16))),
    }


def native_lines(executable) -> list[str]:
    return [line.strip() for line in executable.thunk_sequence().splitlines() if "native driver" in line]


def measure(name: str, function, arguments, repeats: int) -> dict:
    executable = Client().compile(jax.jit(function).lower(*arguments).as_text())
    cpu = jax.devices("cpu")[0]
    jitted = jax.jit(function)  # runs where its committed arguments are: on XLA:CPU
    leaves = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(arguments)]
    on_device = jax.device_put(arguments, cpu)
    sides = {"mlirxla": lambda: executable.execute_numpy(leaves),
             "xla": lambda: jax.block_until_ready(jitted(*on_device))}
    ours = [np.asarray(value) for value in sides["mlirxla"]()]
    theirs = [np.asarray(value) for value in jax.tree_util.tree_leaves(sides["xla"]())]
    same, difference = compare(ours, theirs, TOLERANCE)
    seconds = medians(sides, repeats, LOOP_BLOCK_RUNS, SETTLE_S)
    mlirxla, xla = seconds["mlirxla"], seconds["xla"]
    return {"program": name, "mlirxla_us": mlirxla * 1e6, "xla_us": xla * 1e6, "ratio": mlirxla / xla,
            "same": same, "max_abs_diff": difference, "native": native_lines(executable)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", default="rnn_scan,fori,collatz,cond_scan")
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="end with one JSON line of all figures")
    options = parser.parse_args()
    available = programs(np.random.default_rng(0))
    rows = []
    print(f"{'program':<10} {'mlirxla us':>11} {'XLA us':>9} {'ratio':>6}  match  native driver")
    for name in options.programs.split(","):
        function, arguments = available[name]
        row = measure(name, function, arguments, options.repeats)
        rows.append(row)
        print(f"{name:<10} {row['mlirxla_us']:>11.1f} {row['xla_us']:>9.1f} {row['ratio']:>6.2f}  "
              f"{'yes' if row['same'] else 'NO':<5}  {len(row['native'])} part(s)")
    geomean = math.exp(statistics.fmean(math.log(row["ratio"]) for row in rows))
    print(f"geometric mean ratio: {geomean:.2f}")
    if options.json:
        print(json.dumps({"rows": rows, "geomean": geomean}))


if __name__ == "__main__":
    main()
