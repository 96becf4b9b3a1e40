"""Sharded JAX programs over 8 CPU devices, for the SPMD partitioner's tests and
`benchmarks/spmd_vs_xla.py`: each is a function, its argument shapes and shardings and its
result sharding, over a 1D mesh "x"=8 or a 2x4 mesh ("x", "y"). The conv net keeps its
shapes (NHWC 8x64x64x16, sharded on height) whatever the size. `mlp_grad` is there for the
collective combiners: its gradients' all-reduces are independent.

`python examples/spmd_programs.py OUT [--size N] [--names a,b]` asks jax for 8 CPU devices,
lowers every program (`OUT/<name>.mlir`), runs it on jax's CPU devices on seeded random
arguments and writes arguments and results (`OUT/<name>.npz`, `arg<i>`, `out<i>`, with
`xla_seconds` per call, the median of 5, and XLA's `xla_temp_bytes` per device), and XLA's
optimized HLO (`OUT/<name>.xla.txt`). It runs in a child process of its users, because jax
reads the device count once per process.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

DEVICES = 8


@dataclass(frozen=True)
class ShardedProgram:
    """`arguments(size)`: [(shape, spec)], a spec a tuple of mesh axis names or None per dim;
    `result`: the result's spec (one result)."""

    name: str
    function: Callable
    arguments: Callable[[int], list]
    result: tuple
    mesh: tuple[tuple[str, int], ...] = (("x", 8),)


def matmul(a, b):
    return a @ b


def mlp(x, w1, b1, w2, b2):
    import jax

    return jax.nn.relu(x @ w1 + b1) @ w2 + b2


def elementwise_reduce(x, y):
    import jax.numpy as jnp

    return jnp.sum(jnp.exp(x * 0.01) * y + 1.0, axis=1) + jnp.max(x, axis=1)


def layer_norm(x, scale, bias):
    import jax.numpy as jnp
    from jax import lax

    mean = jnp.mean(x, axis=-1, keepdims=True)
    variance = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) * lax.rsqrt(variance + 1e-5) * scale + bias


def transformer(x, wq, wk, wv, wo, w1, w2, g, b):
    """A Megatron block: heads sharded (q, k, v by columns, the output projection by rows),
    the FFN sharded (first layer by columns, second by rows), batch on the other axis."""
    import jax

    batch, sequence, width = x.shape
    count = 8

    def heads(t):
        return t.reshape(batch, sequence, count, width // count)

    h = layer_norm(x, g, b)
    q, k, v = heads(h @ wq), heads(h @ wk), heads(h @ wv)
    scores = jax.numpy.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(width // count)
    attention = jax.numpy.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores, axis=-1), v).reshape(batch, sequence, width)
    x = x + attention @ wo
    return x + jax.nn.gelu(layer_norm(x, g, b) @ w1, approximate=True) @ w2


def conv_net(x, w1, w2):
    """Two 3x3 convolutions (stride 1, then stride 2, both SAME) with relu and a 2x2 max pool
    between them, NHWC: sharded on height, each needs its neighbours' rows (halo exchange)."""
    import jax
    from jax import lax

    dimensions = ("NHWC", "HWIO", "NHWC")
    x = jax.nn.relu(lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=dimensions))
    x = lax.reduce_window(x, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    return jax.nn.relu(lax.conv_general_dilated(x, w2, (2, 2), "SAME", dimension_numbers=dimensions))


def mlp_grad(x, y, w1, w2):
    """Data-parallel training's gradients: the batch sharded, the weights replicated, so each
    weight's gradient is a partial sum over the batch (independent all-reduces, which the
    combiner makes one); their product makes one result."""
    import jax
    import jax.numpy as jnp

    def loss(w1, w2):
        return jnp.mean((jax.nn.relu(x @ w1) @ w2 - y) ** 2)

    g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
    return g1 @ g2


def scan(h, w):
    """A recurrence in a while loop, the carried state sharded by rows."""
    import jax
    from jax import lax

    return lax.fori_loop(0, 4, lambda i, c: jax.numpy.tanh(c @ w) + 0.1 * i, h)


MESH_2D = (("x", 2), ("y", 4))
PROGRAMS = [
    ShardedProgram("matmul_rows", matmul, lambda n: [((n, n), ("x", None)), ((n, n), (None, None))], ("x", None)),
    ShardedProgram("matmul_contracting", matmul, lambda n: [((n, n), (None, "x")), ((n, n), ("x", None))], (None, None)),
    ShardedProgram("matmul_2d", matmul, lambda n: [((n, n), ("x", "y")), ((n, n), ("y", None))], ("x", None), MESH_2D),
    ShardedProgram("mlp_2d", mlp, lambda n: [((n // 4, n), ("x", None)), ((n, 2 * n), (None, "y")), ((2 * n,), ("y",)),
                                             ((2 * n, n), ("y", None)), ((n,), (None,))], ("x", None), MESH_2D),
    ShardedProgram("elementwise_reduce", elementwise_reduce, lambda n: [((n, n), ("x", "y")), ((n, n), ("x", "y"))], ("x",), MESH_2D),
    ShardedProgram("transformer", transformer,
                   lambda n: [((4, n // 4, n // 2), ("x", None, None))] + [((n // 2, n // 2), (None, "y"))] * 3
                   + [((n // 2, n // 2), ("y", None)), ((n // 2, 2 * n), (None, "y")), ((2 * n, n // 2), ("y", None)),
                      ((n // 2,), (None,)), ((n // 2,), (None,))], ("x", None, None), MESH_2D),
    ShardedProgram("conv_net_height", conv_net, lambda n: [((8, 64, 64, 16), (None, "x", None, None)),
                                                           ((3, 3, 16, 16), (None, None, None, None)),
                                                           ((3, 3, 16, 16), (None, None, None, None))], (None, "x", None, None)),
    ShardedProgram("mlp_grad", mlp_grad, lambda n: [((n, n // 2), ("x", None)), ((n, n // 4), ("x", None)),
                                                   ((n // 2, n), (None, None)), ((n, n // 4), (None, None))], (None, None)),
    ShardedProgram("scan", scan, lambda n: [((n, n // 2), ("x", None)), ((n // 2, n // 2), (None, None))], ("x", None)),
]


def program(name: str) -> ShardedProgram:
    return next(p for p in PROGRAMS if p.name == name)


def export(out: str, size: int, names: list[str] | None) -> None:
    import jax

    jax.config.update("jax_num_cpu_devices", DEVICES)
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    devices = np.array(jax.devices("cpu")[:DEVICES])
    os.makedirs(out, exist_ok=True)
    for index, p in enumerate(PROGRAMS):
        if names and p.name not in names:
            continue
        mesh = Mesh(devices.reshape([s for _, s in p.mesh]), tuple(n for n, _ in p.mesh))
        shard = lambda spec: NamedSharding(mesh, PartitionSpec(*spec))
        specs = p.arguments(size)
        jitted = jax.jit(p.function, in_shardings=tuple(shard(s) for _, s in specs), out_shardings=shard(p.result))
        lowered = jitted.lower(*[jax.ShapeDtypeStruct(shape, jnp.float32) for shape, _ in specs])
        with open(os.path.join(out, f"{p.name}.mlir"), "w") as f:
            f.write(lowered.as_text())
        compiled = lowered.compile()
        with open(os.path.join(out, f"{p.name}.xla.txt"), "w") as f:
            f.write(compiled.as_text())
        rng = np.random.default_rng(index)
        arguments = [rng.standard_normal(shape).astype(np.float32) / math.sqrt(shape[0]) for shape, _ in specs]
        placed = [jax.device_put(a, shard(s)) for a, (_, s) in zip(arguments, specs)]
        result = compiled(*placed)
        seconds = []
        for _ in range(5):
            start = time.perf_counter()
            compiled(*placed).block_until_ready()
            seconds.append(time.perf_counter() - start)
        temp = compiled.memory_analysis().temp_size_in_bytes
        np.savez(os.path.join(out, f"{p.name}.npz"), **{f"arg{i}": a for i, a in enumerate(arguments)}, out0=np.asarray(result),
                 xla_seconds=np.median(seconds), xla_temp_bytes=temp)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--names", default="")
    options = parser.parse_args()
    export(options.out, options.size, [n for n in options.names.split(",") if n])
