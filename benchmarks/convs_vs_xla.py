"""Convolutions in every position: mlirxla's CPU backend vs XLA:CPU, side by side in one process.

Each workload is a jax function around a convolution: alone in NHWC and in NCHW, on one
large image (112x112, 64 -> 64 channels: its im2col rows, 29 MiB, far outgrow the caches), followed by
a training-mode batch normalization (batch statistics), with bias, relu and a 2x2 max pool,
depthwise, 1x1, strided, and the gradients of a convolution and of a strided one with
respect to its input and its weights (`jax.grad`, which jax lowers to convolutions with
swapped dimension numbers; a strided layer's, with its input or its window dilated); and
`jnp.convolve` of a 20000-sample signal with a 1001-tap filter (one channel, a long window). Its StableHLO (`jax.jit(f).lower(...).as_text()`) is what mlirxla
compiles (`Client().compile(text).execute_numpy`), and jax.jit runs the same function on
XLA:CPU, on the same random inputs (0.1 * standard normal).

Per workload: both sides run --repeats times taking turns in blocks, each begun once the other
side's threads have gone to sleep (`cpu_vs_xla.medians`), so that the machine's noise hits
both and neither side's spinning threads slow the other; it prints the medians, their ratio (mlirxla / XLA; below 1 is
faster), whether the outputs match XLA's (rtol = atol = 1e-3, batch normalization divides
by a standard deviation) and the largest absolute difference, the strategy each
convolution took (the thunk sequence's decisions), then the geometric mean of the ratios.

    python benchmarks/convs_vs_xla.py [--workloads nhwc,bn] [--repeats 20] [--force im2col_gemm] [--json]

--force makes every convolution the strategy can run take it (`convolution_strategy.forcing`),
to measure one strategy against the model's choice.
"""

import argparse
import contextlib
import json
import math
import os
import shutil
import sys
import tempfile

import jax
import jax.numpy as jnp
import numpy as np

from mlirxla.runtime.client import Client, CompileOptions
from mlirxla.transforms import convolution_strategy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_vs_xla import BLOCK_RUNS, SETTLE_S, medians  # noqa: E402

RTOL = ATOL = 1e-3
NHWC = ("NHWC", "HWIO", "NHWC")
NCHW = ("NCHW", "OIHW", "NCHW")


def convolve(x, w, stride=1, numbers=NHWC, groups=1):
    return jax.lax.conv_general_dilated(x, w, (stride, stride), "SAME", dimension_numbers=numbers, feature_group_count=groups)


def conv_nhwc(x, w):
    return convolve(x, w)


def conv_nchw(x, w):
    return convolve(x, w, numbers=NCHW)


def conv_batch_norm(x, w, scale, offset):
    y = convolve(x, w)
    mean = jnp.mean(y, axis=(0, 1, 2))
    variance = jnp.mean(jnp.square(y - mean), axis=(0, 1, 2))
    return (y - mean) * jax.lax.rsqrt(variance + 1e-5) * scale + offset


def conv_bias_relu_pool(x, w, bias):
    y = jax.nn.relu(convolve(x, w) + bias)
    return jax.lax.reduce_window(y, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def depthwise(x, w):
    return convolve(x, w, groups=x.shape[-1])


def pointwise(x, w):
    return convolve(x, w)


def strided(x, w):
    return convolve(x, w, stride=2)


def input_gradient(x, w):
    return jax.grad(lambda x: jnp.sum(jnp.square(convolve(x, w))))(x)


def weight_gradient(x, w):
    return jax.grad(lambda w: jnp.sum(jnp.square(convolve(x, w))))(w)


def strided_input_gradient(x, w):
    return jax.grad(lambda x: jnp.sum(jnp.square(convolve(x, w, stride=2))))(x)


def strided_weight_gradient(x, w):
    return jax.grad(lambda w: jnp.sum(jnp.square(convolve(x, w, stride=2))))(w)


def signal_convolve(x, k):
    return jnp.convolve(x, k, mode="same")


def tensor(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32)


N, S, C, F = 8, 32, 32, 64
WORKLOADS = {
    "nhwc": (conv_nhwc, (tensor(N, S, S, C), tensor(3, 3, C, F))),
    "nchw": (conv_nchw, (tensor(N, C, S, S), tensor(F, C, 3, 3))),
    "large_image": (conv_nhwc, (tensor(1, 112, 112, F), tensor(3, 3, F, F))),
    "bn": (conv_batch_norm, (tensor(N, S, S, C), tensor(3, 3, C, F), tensor(F), tensor(F))),
    "bias_relu_pool": (conv_bias_relu_pool, (tensor(N, S, S, C), tensor(3, 3, C, F), tensor(F))),
    "depthwise": (depthwise, (tensor(N, S, S, F), tensor(3, 3, 1, F))),
    "pointwise": (pointwise, (tensor(N, S, S, F), tensor(1, 1, F, F))),
    "strided": (strided, (tensor(N, S, S, C), tensor(3, 3, C, F))),
    "input_grad": (input_gradient, (tensor(N, S, S, C), tensor(3, 3, C, F))),
    "weight_grad": (weight_gradient, (tensor(N, S, S, C), tensor(3, 3, C, F))),
    "strided_input_grad": (strided_input_gradient, (tensor(N, S, S, C), tensor(3, 3, C, F))),
    "strided_weight_grad": (strided_weight_gradient, (tensor(N, S, S, C), tensor(3, 3, C, F))),
    "signal": (signal_convolve, (tensor(20000), tensor(1001))),
}


def random_arguments(abstract, generator):
    return [(0.1 * generator.standard_normal(value.shape)).astype(value.dtype) for value in abstract]


def convolution_decisions(dump: str) -> list[str]:
    """The thunk sequence's decisions about convolutions (dumped as `thunk-sequence.txt`)."""
    path = next(name for name in os.listdir(dump) if name.endswith("thunk-sequence.txt"))
    with open(os.path.join(dump, path)) as sequence:
        lines = sequence.read().split("decisions:\n", 1)[-1].splitlines()
    return [line.strip() for line in lines if "convolution" in line]


def measure(name: str, repeats: int, client: Client) -> dict:
    function, abstract = WORKLOADS[name]
    arguments = random_arguments(abstract, np.random.default_rng(0))
    text = jax.jit(function).lower(*abstract).as_text()
    dump = tempfile.mkdtemp(prefix=f"convs_vs_xla_{name}_")
    try:
        executable = client.compile(text, CompileOptions(dump_to=dump))
        decisions = convolution_decisions(dump)
    except Exception as error:  # a failed workload is reported, the others go on
        return {"workload": name, "failed": f"{type(error).__name__}: {error}".splitlines()[0]}
    finally:
        shutil.rmtree(dump, ignore_errors=True)
    jitted = jax.jit(function)
    on_device = jax.device_put(arguments, jax.devices("cpu")[0])
    ours = lambda: executable.execute_numpy(arguments)
    theirs = lambda: jax.block_until_ready(jitted(*on_device))
    seconds = medians({"mlirxla": ours, "xla": theirs}, repeats, BLOCK_RUNS, SETTLE_S)
    mine, xla = seconds["mlirxla"], seconds["xla"]
    got = [np.asarray(value) for value in ours()]
    expected = [np.asarray(value) for value in jax.tree_util.tree_leaves(theirs())]
    matches = all(np.allclose(g, e, rtol=RTOL, atol=ATOL) for g, e in zip(got, expected))
    difference = max(float(np.max(np.abs(g - e))) for g, e in zip(got, expected))
    return {"workload": name, "mlirxla_ms": 1e3 * mine, "xla_ms": 1e3 * xla, "ratio": mine / xla,
            "matches": matches, "max_abs_diff": difference, "decisions": decisions}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--force", choices=convolution_strategy.STRATEGIES, help="the strategy every convolution it can run takes")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    names = [name for name in args.workloads.split(",") if name]
    unknown = [name for name in names if name not in WORKLOADS]
    if unknown:
        print(f"convs_vs_xla: unknown workload {unknown[0]!r} (known: {', '.join(WORKLOADS)})", file=sys.stderr)
        return 2
    client = Client()
    rows = []
    print(f"{'workload':16} {'mlirxla ms':>11} {'XLA ms':>9} {'ratio':>7}  match  max|diff|")
    for name in names:
        with convolution_strategy.forcing(args.force) if args.force else contextlib.nullcontext():
            row = measure(name, args.repeats, client)
        rows.append(row)
        if "failed" in row:
            print(f"{name:16} failed: {row['failed']}")
            continue
        print(f"{name:16} {row['mlirxla_ms']:11.3f} {row['xla_ms']:9.3f} {row['ratio']:7.2f}  {'yes' if row['matches'] else 'NO ':5}  {row['max_abs_diff']:.2e}")
        for decision in row["decisions"]:
            print(f"{'':18}{decision}")
    ratios = [row["ratio"] for row in rows if "ratio" in row]
    geomean = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")
    print(f"geometric mean ratio: {geomean:.2f}")
    if args.json:
        print(json.dumps({"rows": rows, "geomean": geomean}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
