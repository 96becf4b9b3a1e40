"""The workloads of `benchmarks/cpu_vs_xla.py`: everyday JAX programs, each at a benchmark size
and at a small size the tests run (`test/py/test_benchmark_workloads.py`).

The families users run: dense layers and matmuls (f32 and bf16), elementwise chains,
normalization (softmax, layer norm, batch norm), attention (a causal transformer block, f32
and bf16, and masked multi-head attention), convolutions (a conv net; conv + batch norm +
max pooling), recurrent loops (`lax.scan` RNN and LSTM), embedding gathers and their
scatter-add gradient, sort and top-k, an Adam update over a pytree of many parameters,
backward passes (`jax.grad` of an MLP and of a transformer block), cross-entropy with its
gradient, small-batch inference where per-call overhead dominates, and an int8 dense layer.

A workload's integer arguments (token ids, labels, lengths) are drawn below `integer_high`
(`small_integer_high` at the small size); its float arguments are 0.1 * standard normal, so
the outputs stay well away from overflow and cancellation. `tolerance` is how close
mlirxla's outputs must be to XLA's: bf16 programs round differently (XLA:CPU computes them in
f32 and rounds once).
"""

import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from jax_programs import block, block_arguments, convnet, layer_norm, mlp3, rnn_scan, softmax, tensor  # noqa: E402

BF16 = jnp.bfloat16
F32_TOLERANCE = {"rtol": 1e-4, "atol": 1e-4}
BF16_TOLERANCE = {"rtol": 3e-2, "atol": 3e-2}
# sums of 4096 f32 terms whose partial sums reach 8e4, in XLA's order and in ours: each is
# within 0.03 of float64, so an element near zero may differ by that much between the two
SCAN_TOLERANCE = {"rtol": 1e-4, "atol": 0.1}


@dataclass(frozen=True)
class Workload:
    """`arguments()` and `small()` give the abstract arguments (a pytree of
    jax.ShapeDtypeStruct) at the benchmark's size and at the tests' size."""

    name: str
    function: Callable
    arguments: Callable[[], tuple]
    small: Callable[[], tuple]
    integer_high: int = 1
    small_integer_high: int | None = None
    tolerance: dict | None = None

    def integer_bound(self, small: bool) -> int:
        return (self.small_integer_high or self.integer_high) if small else self.integer_high

    def abstract(self, small: bool = False):
        return self.small() if small else self.arguments()

    def random_arguments(self, generator: np.random.Generator, small: bool = False):
        """Concrete numpy arguments for the abstract ones at that size."""
        high = self.integer_bound(small)

        def draw(value):
            if jnp.issubdtype(value.dtype, jnp.integer):
                return generator.integers(0, high, value.shape).astype(value.dtype)
            return (0.1 * generator.standard_normal(value.shape)).astype(value.dtype)

        return jax.tree_util.tree_map(draw, self.abstract(small))

    @property
    def rtol(self) -> float:
        return (self.tolerance or F32_TOLERANCE)["rtol"]

    @property
    def atol(self) -> float:
        return (self.tolerance or F32_TOLERANCE)["atol"]


# ---------------------------------------------------------------- dense, elementwise, normalization


def matmul(x, w):
    return x @ w


def chain(x, y):
    """Ten elementwise ops, exp and tanh among them."""
    a = jnp.tanh((x + y) * x) - y
    a = jnp.maximum(jnp.exp(a), x) * 0.5
    return jnp.sqrt(jnp.abs(a)) + y


def mlp3_of(batch, width, dtype=jnp.float32):
    return lambda: (tensor(batch, width, dtype=dtype),) + (tensor(width, width, dtype=dtype), tensor(width, dtype=dtype)) * 3


def batch_norm(x, scale, bias):
    """Training-mode batch normalization of NHWC activations: statistics over N, H and W."""
    mean = jnp.mean(x, axis=(0, 1, 2))
    variance = jnp.mean(jnp.square(x - mean), axis=(0, 1, 2))
    return (x - mean) * lax.rsqrt(variance + 1e-5) * scale + bias


def nhwc_and_channel(n, h, w, c):
    return lambda: (tensor(n, h, w, c), tensor(c), tensor(c))


def width_rows_and_scale(rows, width):
    return lambda: (tensor(rows, width), tensor(width), tensor(width))


# ---------------------------------------------------------------- attention


def masked_attention(q, k, v, lengths):
    """Multi-head attention over padded sequences: keys past each sequence's length masked out."""
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
    valid = jnp.arange(k.shape[2])[None, :] < lengths[:, None]
    scores = jnp.where(valid[:, None, None, :], scores, -1e9)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, axis=-1), v)


def attention_of(batch, heads, sequence, depth):
    shape = (batch, heads, sequence, depth)
    return lambda: (tensor(*shape), tensor(*shape), tensor(*shape), tensor(batch, dtype=jnp.int32))


def transformer_of(dtype, sequence, width, hidden):
    def arguments():
        x, parameters = block_arguments(sequence, width, hidden)
        retype = lambda value: tensor(*value.shape, dtype=dtype)
        return retype(x), jax.tree_util.tree_map(retype, parameters)

    return arguments


# ---------------------------------------------------------------- convolutions


def conv_bn_pool(x, w, scale, bias):
    """A 3x3 convolution, batch normalization, relu, 2x2 max pooling."""
    y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    y = jax.nn.relu(batch_norm(y, scale, bias))
    return lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def conv_bn_pool_of(n, size, channels_in, channels_out):
    return lambda: (tensor(n, size, size, channels_in), tensor(3, 3, channels_in, channels_out), tensor(channels_out), tensor(channels_out))


def convnet_of(n, size):
    return lambda: (tensor(n, size, size, 3), tensor(3, 3, 3, 32), tensor(32), tensor(3, 3, 32, 64), tensor(64), tensor(64, 10), tensor(10))


# ---------------------------------------------------------------- recurrent loops


def lstm_scan(h, c, w, u, b, xs):
    """An LSTM over the steps of xs (batch-major inside each step), returning the last states."""

    def step(state, x):
        h, c = state
        gates = x @ w + h @ u + b
        i, f, g, o = jnp.split(gates, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), None

    return lax.scan(step, (h, c), xs)[0]


def lstm_of(steps, batch, inputs, hidden):
    return lambda: (tensor(batch, hidden), tensor(batch, hidden), tensor(inputs, 4 * hidden), tensor(hidden, 4 * hidden),
                    tensor(4 * hidden), tensor(steps, batch, inputs))


def rnn_of(steps, width):
    return lambda: (tensor(width), tensor(width, width), tensor(steps, width))


# ---------------------------------------------------------------- embeddings, sorting


def embedding_sum(table, ids):
    """Bag of embeddings: look each id's row up and sum the rows of each example."""
    return jnp.sum(table[ids], axis=1)


def embedding_gradient(table, ids, upstream):
    """The gradient with respect to the table of a loss over the bag of embeddings: a
    scatter-add of the rows' gradients into the rows the ids name."""
    return jax.grad(lambda t: jnp.sum(jnp.tanh(embedding_sum(t, ids)) * upstream))(table)


def embedding_of(vocabulary, width, batch, bag):
    return lambda: (tensor(vocabulary, width), tensor(batch, bag, dtype=jnp.int32))


def embedding_gradient_of(vocabulary, width, batch, bag):
    return lambda: (tensor(vocabulary, width), tensor(batch, bag, dtype=jnp.int32), tensor(batch, width))


def sort_rows(x):
    return jnp.sort(x, axis=-1)


def top_k(x):
    return lax.top_k(x, 16)


# ---------------------------------------------------------------- training steps


def adam(parameters, gradients, first, second, step):
    """One Adam step over every parameter of a pytree (betas 0.9, 0.999, learning rate 1e-3),
    `step` counting from 0. The second moments are random inputs here, so their magnitude
    stands for them."""
    b1, b2, rate, eps = 0.9, 0.999, 1e-3, 1e-8
    first = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, first, gradients)
    second = jax.tree_util.tree_map(lambda v, g: b2 * jnp.abs(v) + (1 - b2) * g * g, second, gradients)
    count = (step + 1).astype(jnp.float32)
    correction = jnp.sqrt(1 - b2**count) / (1 - b1**count)
    parameters = jax.tree_util.tree_map(lambda p, m, v: p - rate * correction * m / (jnp.sqrt(v) + eps), parameters, first, second)
    return parameters, first, second


def adam_of(layers, width):
    """A pytree shaped like an MLP's parameters: `layers` weight matrices and bias vectors."""

    def arguments():
        tree = [{"w": tensor(width, width), "b": tensor(width)} for _ in range(layers)]
        return tree, tree, tree, tree, tensor(dtype=jnp.int32)

    return arguments


def cross_entropy(logits, labels):
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], axis=-1))


def cross_entropy_and_gradient(logits, labels):
    return jax.value_and_grad(cross_entropy)(logits, labels)


def logits_of(batch, classes):
    return lambda: (tensor(batch, classes), tensor(batch, dtype=jnp.int32))


def mlp_loss(parameters, x, labels):
    for w, b in parameters[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = parameters[-1]
    return cross_entropy(x @ w + b, labels)


def mlp_gradient(parameters, x, labels):
    return jax.grad(mlp_loss)(parameters, x, labels)


def mlp_gradient_of(batch, width, classes):
    def arguments():
        layers = [(tensor(width, width), tensor(width))] * 2 + [(tensor(width, classes), tensor(classes))]
        return layers, tensor(batch, width), tensor(batch, dtype=jnp.int32)

    return arguments


def transformer_gradient(x, parameters):
    return jax.grad(lambda p: jnp.sum(jnp.square(block(x, p))))(parameters)


# ---------------------------------------------------------------- small-batch inference


def small_mlp(x, w1, b1, w2, b2):
    """One example through a two-layer classifier: microseconds of work, so dispatch and
    per-call overhead decide the time."""
    return jax.nn.softmax(jax.nn.relu(x @ w1 + b1) @ w2 + b2)


def small_mlp_of(width, classes):
    return lambda: (tensor(1, width), tensor(width, width), tensor(width), tensor(width, classes), tensor(classes))


def quantized_linear(x, w, scale):
    """An int8 dense layer of quantized inference: int8 activations by int8 weights, summed in
    int32, scaled back to f32 per output feature."""
    return jnp.matmul(x, w, preferred_element_type=jnp.int32).astype(jnp.float32) * scale


def quantized_linear_of(batch, features):
    return lambda: (tensor(batch, features, dtype=jnp.int8), tensor(features, features, dtype=jnp.int8), tensor(features))


# ---------------------------------------------------------------- strided convolutions, pooling, scans: training gradients


def strided_convnet_loss(parameters, x, labels):
    """A stride-2 3x3 convolution, relu, 2x2 max pooling, a second convolution, global
    average pooling and a dense layer's cross entropy."""
    first, second, dense = parameters
    x = jax.nn.relu(lax.conv_general_dilated(x, first, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
    x = lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    x = jax.nn.relu(lax.conv_general_dilated(x, second, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
    logits = jnp.mean(x, axis=(1, 2)) @ dense
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], axis=1))


def strided_convnet_gradient(parameters, x, labels):
    """The gradient of `strided_convnet_loss` with respect to its parameters: the input
    gradient of a strided convolution (an input dilation), max pooling's (a
    select_and_scatter), kernel gradients (window dilations, reversed kernels)."""
    return jax.grad(strided_convnet_loss)(parameters, x, labels)


def strided_convnet_of(batch, size, channels):
    return lambda: ((tensor(3, 3, 3, channels), tensor(3, 3, channels, 2 * channels), tensor(2 * channels, 10)),
                    tensor(batch, size, size, 3), jax.ShapeDtypeStruct((batch,), jnp.int32))


def cumsum_gradient(x):
    """jnp.cumsum along the rows and its gradient (a reverse cumsum): reduce_windows spanning the axis."""
    return jax.grad(lambda x: jnp.sum(jnp.cumsum(x, axis=1) ** 2))(x)


def conv1d_gradient(x, w):
    """The input and kernel gradients of a stride-2 1-D convolution over NWC sequences."""
    convolve = lambda x, w: lax.conv_general_dilated(x, w, (2,), "SAME", dimension_numbers=("NWC", "WIO", "NWC"))
    return jax.grad(lambda x, w: jnp.sum(convolve(x, w) ** 2), argnums=(0, 1))(x, w)


def normalize_rows_in_a_loop(x):
    """A fori_loop dividing each row of its carried array by the row's norm, in place
    (`x.at[i].set(f(x[i]))`: a dynamic slice and a scatter of the same row)."""
    normalized = lambda i, x: x.at[i].set(x[i] / jnp.sqrt(jnp.sum(x[i] * x[i])))
    return lax.fori_loop(0, x.shape[0], normalized, x)


WORKLOADS = [
    Workload("matmul", matmul, lambda: (tensor(1024, 1024),) * 2, lambda: (tensor(64, 48), tensor(48, 32))),
    Workload("mlp", mlp3, mlp3_of(256, 1024), mlp3_of(8, 32)),
    Workload("chain", chain, lambda: (tensor(4 * 1024 * 1024),) * 2, lambda: (tensor(1000),) * 2),
    Workload("softmax", softmax, lambda: (tensor(4096, 1024),), lambda: (tensor(16, 40),)),
    Workload("transformer", block, transformer_of(jnp.float32, 256, 512, 2048), transformer_of(jnp.float32, 16, 64, 128)),
    Workload("convnet", convnet, convnet_of(32, 32), convnet_of(2, 8)),
    Workload("layernorm", layer_norm, width_rows_and_scale(8192, 1024), width_rows_and_scale(16, 40)),
    Workload("batchnorm", batch_norm, nhwc_and_channel(64, 32, 32, 64), nhwc_and_channel(2, 4, 4, 8)),
    Workload("attention_mask", masked_attention, attention_of(8, 8, 256, 64), attention_of(2, 2, 8, 4), integer_high=257,
             small_integer_high=9),
    Workload("conv_bn_pool", conv_bn_pool, conv_bn_pool_of(16, 32, 32, 64), conv_bn_pool_of(2, 8, 3, 4)),
    Workload("rnn_scan", rnn_scan, rnn_of(64, 128), rnn_of(5, 8)),
    Workload("lstm_scan", lstm_scan, lstm_of(32, 32, 128, 256), lstm_of(4, 2, 6, 8)),
    Workload("embedding", embedding_sum, embedding_of(32768, 256, 256, 32), embedding_of(50, 8, 4, 3), integer_high=32768,
             small_integer_high=50),
    Workload("embedding_grad", embedding_gradient, embedding_gradient_of(32768, 256, 256, 32), embedding_gradient_of(50, 8, 4, 3),
             integer_high=32768, small_integer_high=50),
    Workload("sort", sort_rows, lambda: (tensor(512, 4096),), lambda: (tensor(4, 33),)),
    Workload("top_k", top_k, lambda: (tensor(512, 4096),), lambda: (tensor(4, 80),)),
    Workload("adam", adam, adam_of(16, 512), adam_of(3, 8), integer_high=1000),
    Workload("cross_entropy", cross_entropy_and_gradient, logits_of(4096, 1024), logits_of(8, 12), integer_high=12),
    Workload("mlp_grad", mlp_gradient, mlp_gradient_of(256, 1024, 10), mlp_gradient_of(8, 16, 5), integer_high=5),
    Workload("transformer_grad", transformer_gradient, transformer_of(jnp.float32, 128, 256, 1024), transformer_of(jnp.float32, 8, 32, 64)),
    Workload("small_mlp", small_mlp, small_mlp_of(256, 10), small_mlp_of(16, 4)),
    Workload("mlp_bf16", mlp3, mlp3_of(256, 1024, BF16), mlp3_of(8, 32, BF16), tolerance=BF16_TOLERANCE),
    Workload("transformer_bf16", block, transformer_of(BF16, 256, 512, 2048), transformer_of(BF16, 16, 64, 128), tolerance=BF16_TOLERANCE),
    Workload("strided_convnet_grad", strided_convnet_gradient, strided_convnet_of(16, 64, 32), strided_convnet_of(2, 8, 4), integer_high=10),
    Workload("cumsum_grad", cumsum_gradient, lambda: (tensor(256, 4096),), lambda: (tensor(4, 37),), tolerance=SCAN_TOLERANCE),
    Workload("conv1d_grad", conv1d_gradient, lambda: (tensor(16, 1024, 64), tensor(5, 64, 64)), lambda: (tensor(2, 17, 3), tensor(5, 3, 4))),
    Workload("row_update_loop", normalize_rows_in_a_loop, lambda: (tensor(512, 256),), lambda: (tensor(8, 16),)),
    Workload("int8_linear", quantized_linear, quantized_linear_of(256, 1024), quantized_linear_of(8, 20), integer_high=128),
]


def workload(name: str) -> Workload:
    return next(candidate for candidate in WORKLOADS if candidate.name == name)
