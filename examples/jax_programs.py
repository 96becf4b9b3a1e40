"""The JAX programs whose StableHLO the tests and benchmarks compile.

`scripts/export-programs` lowers each of them and writes the result under `test/data/jax/`
(`examples/export_programs.py`). A program is a jax function and the abstract arguments it
is lowered for; the numbered ones are small samples of what JAX emits (calls, loops,
branches, chlo, shardings), `programs/` holds the benchmark programs.

The sharded programs run over a 2x2 mesh of CPU devices: importing this module does not touch
jax's backends, so the exporter can ask for four CPU devices first.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

F32 = jnp.float32


@dataclass(frozen=True)
class Program:
    """`stem` names its files, relative to the output folder; `arguments` is called only when
    the program is lowered, after the devices are configured (sharded arguments need the mesh);
    `forms` are the exporter's forms to write (`export_programs.FORMS`); `shardy` False lowers
    with Shardy off, shardings as `mhlo.sharding` strings."""

    stem: str
    function: Callable
    arguments: Callable[[], tuple]
    forms: tuple[str, ...] = ("stablehlo",)
    shardy: bool = True


def tensor(*shape, dtype=F32, sharding=None) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, dtype, sharding=sharding)


def mesh() -> Mesh:
    return Mesh(np.array(jax.devices("cpu")[:4]).reshape(2, 2), ("data", "model"))


def sharded(*shape, spec: PartitionSpec) -> jax.ShapeDtypeStruct:
    return tensor(*shape, sharding=NamedSharding(mesh(), spec))


# ---------------------------------------------------------------- the samples


def mlp(params, x):
    """Two dense layers, relu between them, softmax over the classes."""
    (w1, b1), (w2, b2) = params
    hidden = jax.nn.relu(x @ w1 + b1)
    return jax.nn.softmax(hidden @ w2 + b2)


def mlp_arguments():
    return [(tensor(64, 128), tensor(128)), (tensor(128, 10), tensor(10))], tensor(32, 64)


def scan_loop_and_gelu_branch(xs, n):
    """A scan carrying a tanh recurrence, a loop run `n` times, and a branch between exact and
    tanh-approximated gelu."""

    def step(h, x):
        h = jnp.tanh(h * 0.5 + x)
        return h, jnp.sum(h)

    h, sums = lax.scan(step, jnp.zeros(xs.shape[1], F32), xs)
    _, h = lax.while_loop(lambda state: state[0] < n, lambda state: (state[0] + 1, state[1] * 1.01), (jnp.int32(0), h))
    exact = lambda h: jax.nn.gelu(h, approximate=False)
    approximate = lambda h: jax.nn.gelu(h, approximate=True)
    return lax.cond(jnp.sum(h) > 0, approximate, exact, h), sums


def scan_loop_and_gelu_branch_arguments():
    return tensor(8, 16), tensor(dtype=jnp.int32)


def sharded_dense_relu_sum(x, w):
    """A dense layer and relu whose activations are constrained to the whole mesh, then a row sum."""
    h = jax.nn.relu(x @ w)
    h = lax.with_sharding_constraint(h, NamedSharding(mesh(), PartitionSpec("data", "model")))
    return jnp.sum(h, axis=1)


def sharded_dense_relu_sum_arguments():
    return sharded(16, 64, spec=PartitionSpec("data", None)), sharded(64, 128, spec=PartitionSpec(None, "model"))


def shard_map_sum(x):
    """Each device sums its block; the sums meet over the data axis."""

    def local_sum(block):
        return lax.psum(jnp.sum(block), "data")

    return jax.shard_map(local_sum, mesh=mesh(), in_specs=PartitionSpec("data", None), out_specs=PartitionSpec())(x)


def shard_map_sum_arguments():
    return (sharded(16, 64, spec=PartitionSpec("data", None)),)


def dense_relu_softmax(params, x):
    """One dense layer, relu, softmax: the program shown after stablehlo-legalize-to-linalg."""
    ((w, b),) = params
    return jax.nn.softmax(jax.nn.relu(x @ w + b))


def dense_relu_softmax_arguments():
    return [(tensor(64, 128), tensor(128))], tensor(32, 64)


# ---------------------------------------------------------------- the benchmark programs


def mlp3(x, w1, b1, w2, b2, w3, b3):
    """Three dense layers, relu between them."""
    x = jax.nn.relu(x @ w1 + b1)
    x = jax.nn.relu(x @ w2 + b2)
    return x @ w3 + b3


def mlp3_arguments():
    return (tensor(256, 1024),) + (tensor(1024, 1024), tensor(1024)) * 3


def softmax(x):
    return jax.nn.softmax(x, axis=-1)


def layer_norm(x, scale, bias):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    variance = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) * lax.rsqrt(variance + 1e-5) * scale + bias


def heads(x, count):
    return x.reshape(x.shape[0], count, -1).transpose(1, 0, 2)


def block(x, p):
    """A pre-LN transformer block: causal self-attention and a gelu (tanh) MLP, with residuals."""
    sequence, width, count = x.shape[0], x.shape[1], 8
    qkv = layer_norm(x, p["g_ln1"], p["b_ln1"]) @ p["w_qkv"] + p["b_qkv"]
    q, k, v = (heads(part, count) for part in jnp.split(qkv, 3, axis=-1))
    scores = q @ k.transpose(0, 2, 1) / math.sqrt(width // count)
    scores = jnp.where(jnp.tril(jnp.ones((sequence, sequence), bool)), scores, -1e30)
    attention = (jax.nn.softmax(scores, axis=-1) @ v).transpose(1, 0, 2).reshape(sequence, width)
    x = x + attention @ p["w_out"] + p["b_out"]
    hidden = jax.nn.gelu(layer_norm(x, p["g_ln2"], p["b_ln2"]) @ p["w_mlp1"] + p["b_mlp1"], approximate=True)
    return x + hidden @ p["w_mlp2"] + p["b_mlp2"]


def block_arguments(sequence=256, width=512, hidden=2048):
    parameters = {
        "b_ln1": tensor(width), "b_ln2": tensor(width), "b_mlp1": tensor(hidden), "b_mlp2": tensor(width),
        "b_out": tensor(width), "b_qkv": tensor(3 * width), "g_ln1": tensor(width), "g_ln2": tensor(width),
        "w_mlp1": tensor(width, hidden), "w_mlp2": tensor(hidden, width), "w_out": tensor(width, width),
        "w_qkv": tensor(width, 3 * width),
    }
    return tensor(sequence, width), parameters


def convnet(x, w1, b1, w2, b2, w3, b3):
    """Two 3x3 convolutions with relu, global average pooling, a dense layer."""
    convolve = lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    x = jax.nn.relu(convolve(x, w1) + b1)
    x = jax.nn.relu(convolve(x, w2) + b2)
    return jnp.mean(x, axis=(1, 2)) @ w3 + b3


def convnet_arguments():
    return tensor(32, 32, 32, 3), tensor(3, 3, 3, 32), tensor(32), tensor(3, 3, 32, 64), tensor(64), tensor(64, 10), tensor(10)


def rnn_scan(h, w, xs):
    """A tanh RNN over 64 steps, keeping only the last state."""

    def step(h, x):
        return jnp.tanh(h @ w + x), None

    return lax.scan(step, h, xs)[0]


def rnn_scan_arguments():
    return tensor(128), tensor(128, 128), tensor(64, 128)


PROGRAMS = [
    Program("01_mlp_softmax", mlp, mlp_arguments, forms=("stablehlo", "debuginfo", "export", "vhlo")),
    Program("02_scan_while_cond_gelu", scan_loop_and_gelu_branch, scan_loop_and_gelu_branch_arguments),
    Program("03_sharded_namedsharding", sharded_dense_relu_sum, sharded_dense_relu_sum_arguments, forms=("stablehlo", "compiled_parameters")),
    Program("04_sharded_gspmd_mhlo_sharding", sharded_dense_relu_sum, sharded_dense_relu_sum_arguments, shardy=False),
    Program("05_shard_map_psum", shard_map_sum, shard_map_sum_arguments),
    Program("06_dense_relu_softmax", dense_relu_softmax, dense_relu_softmax_arguments, forms=("linalg",)),
    Program("programs/mlp", mlp3, mlp3_arguments),
    Program("programs/softmax", softmax, lambda: (tensor(4096, 1024),)),
    Program("programs/transformer", block, block_arguments),
    Program("programs/convnet", convnet, convnet_arguments),
    Program("programs/scan", rnn_scan, rnn_scan_arguments),
    Program("programs/mlp_softmax_small", mlp, mlp_arguments),
]


def program(stem: str) -> Program:
    """The program whose files are named `stem` (`"programs/mlp"`, `"01_mlp_softmax"`)."""
    return next(candidate for candidate in PROGRAMS if candidate.stem == stem)
