"""JAX programs, exported the ways JAX exports them, run through mlirxla and held to JAX's own CPU result.

Each program is built with jax, exported (StableHLO text from `jit(f).lower(...).as_text()`;
some also as a portable artifact from `jax.export` and as MLIR bytecode), imported into xhlo,
verified, run through the reference executor, and compared with `jax.jit(f)(*args)` on CPU:
exactly for integers, booleans and random bits, with a tolerance that suits the float type
otherwise. Shapes stay small: the reference interpreter costs microseconds per element per op.
"""

import io
from dataclasses import dataclass
from collections.abc import Callable

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
import ml_dtypes  # noqa: E402
from jax import lax  # noqa: E402

from mlirxla import frontdoor  # noqa: E402
from mlirxla.context import new_context  # noqa: E402
from mlirxla.runtime import literals, reference  # noqa: E402

pytestmark = pytest.mark.jax

F32 = dict(rtol=1e-5, atol=1e-6)
# Transcendentals (exp, tanh, erf, ...): XLA:CPU uses its own polynomial approximations.
F32_MATH = dict(rtol=2e-5, atol=2e-5)
# bf16 has an 8-bit significand (eps 2**-7); XLA:CPU computes in f32 and rounds once, the
# interpreter rounds after every op.
BF16 = dict(rtol=3e-2, atol=3e-2)
EXACT = None


@dataclass(frozen=True)
class Program:
    fn: Callable
    make_args: Callable[[np.random.Generator], tuple]
    tolerance: dict | None  # None: bit-exact


def normal(rng, *shape, dtype=np.float32, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


# --- the programs ------------------------------------------------------------------------


def mlp(x, w1, b1, w2, b2):
    h = jax.nn.relu(x @ w1 + b1)
    return h @ w2 + b2


def mlp_args(rng, dtype=np.float32):
    return (
        normal(rng, 8, 16, dtype=dtype),
        normal(rng, 16, 32, dtype=dtype, scale=0.25),
        normal(rng, 32, dtype=dtype, scale=0.1),
        normal(rng, 32, 4, dtype=dtype, scale=0.25),
        normal(rng, 4, dtype=dtype, scale=0.1),
    )


def convnet(x, k1, k2):
    dn = ("NHWC", "HWIO", "NHWC")
    y = lax.conv_general_dilated(x, k1, (1, 1), "SAME", dimension_numbers=dn)
    y = jax.nn.relu(y)
    y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")  # max pool
    y = lax.conv_general_dilated(y, k2, (1, 1), "VALID", dimension_numbers=dn)
    y = jax.nn.relu(y)
    y = lax.reduce_window(y, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "VALID") / 4.0  # avg pool
    return y.reshape(y.shape[0], -1)


def convnet_args(rng):
    return (normal(rng, 2, 8, 8, 3), normal(rng, 3, 3, 3, 4, scale=0.3), normal(rng, 3, 3, 4, 4, scale=0.3))


SEQ, MODEL, HEADS = 8, 16, 2


def layernorm(x, gamma, beta, eps=1e-5):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + eps) * gamma + beta


def transformer_block(x, ln1, wqkv, wo, ln2, w1, w2):
    head = MODEL // HEADS
    h = layernorm(x, ln1[0], ln1[1])
    q, k, v = jnp.split(h @ wqkv, 3, axis=-1)
    q, k, v = (t.reshape(SEQ, HEADS, head).transpose(1, 0, 2) for t in (q, k, v))
    scores = jnp.einsum("hqd,hkd->hqk", q, k) / np.sqrt(head).astype(np.float32)
    causal = jnp.tril(jnp.ones((SEQ, SEQ), dtype=bool))
    scores = jnp.where(causal, scores, -1e9)
    attention = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum("hqk,hkd->hqd", attention, v).transpose(1, 0, 2).reshape(SEQ, MODEL)
    x = x + out @ wo
    h = layernorm(x, ln2[0], ln2[1])
    return x + jax.nn.gelu(h @ w1) @ w2


def transformer_args(rng):
    ln = lambda: np.stack([1.0 + normal(rng, MODEL, scale=0.1), normal(rng, MODEL, scale=0.1)])
    return (
        normal(rng, SEQ, MODEL),
        ln(),
        normal(rng, MODEL, 3 * MODEL, scale=0.25),
        normal(rng, MODEL, MODEL, scale=0.25),
        ln(),
        normal(rng, MODEL, 2 * MODEL, scale=0.25),
        normal(rng, 2 * MODEL, MODEL, scale=0.25),
    )


def scan(init, xs):
    def step(carry, x):
        carry = 0.9 * carry + jnp.sin(x)
        return carry, carry * x

    return lax.scan(step, init, xs)


def while_loop(x):
    def cond(state):
        i, _ = state
        return i < 10

    def body(state):
        i, y = state
        return i + 1, 0.5 * y + jnp.cos(y)

    return lax.while_loop(cond, body, (jnp.int32(0), x))


def newton_sqrt(a):
    """A data-dependent trip count: Newton steps until every lane has converged."""

    def cond(state):
        x, n = state
        return jnp.logical_and(jnp.max(jnp.abs(x * x - a)) > 1e-4, n < 50)

    def body(state):
        x, n = state
        return 0.5 * (x + a / x), n + 1

    return lax.while_loop(cond, body, (a, jnp.int32(0)))


def cond(pred, x):
    return lax.cond(pred, lambda v: jnp.sin(v) * 2.0, lambda v: v - jnp.exp(v), x)


def switch(index, x):
    return lax.switch(index, [lambda v: v + 1.0, lambda v: v * v, lambda v: jnp.tanh(v)], x)


def gelu_exact(x):
    return jax.nn.gelu(x, approximate=False)


def sort(x):
    return jnp.sort(x, axis=-1)


def argsort(x):
    return jnp.argsort(x, axis=-1, stable=True)


def top_k(x):
    return lax.top_k(x, 3)


def argmax(x):
    return jnp.argmax(x, axis=1), jnp.argmin(x, axis=0)


def cumsum(x):
    return jnp.cumsum(x, axis=0)


def gather(x, idx):
    return x[idx]


def scatter_add(x, idx, v):
    return x.at[idx].add(v)


def scatter_set(x, idx, v):
    return x.at[idx].set(v)


def dropout(x):
    """Keep probability 1/2: the mask and the scaling (x / 0.5) are both exact, so all of it compares bit for bit."""
    key = jax.random.key(42)
    keep = jax.random.bernoulli(key, 0.5, x.shape)
    return jnp.where(keep, x / 0.5, 0.0), keep


def random_bits(key):
    """The threefry key is an argument (uint32[2]): bits and uniforms are deterministic functions of it."""
    key = jax.random.wrap_key_data(key, impl="threefry2x32")
    a, b = jax.random.split(key)
    return jax.random.bits(a, (4, 8), jnp.uint32), jax.random.uniform(b, (16,), jnp.float32)


def int_arith(x, y):
    return x * y + x // y - jnp.remainder(x, y), jnp.maximum(x, y) << 2, jnp.sum(x * x, axis=0)


def bool_logic(a, b, x):
    return jnp.logical_xor(a, b) | (x > 0), jnp.any(a & ~b, axis=1), jnp.where(a, x, -x)


def histogram2d(a, b, w):
    """Two searchsorted loops whose bodies hold kernels with scratch in the slab, beside
    thunks outside the loops (jax's lax_numpy_test testHistogram2d0 raced here)."""
    return jnp.histogram2d(a, b, bins=2, weights=w, density=True, range=[(-1, 1), (-2, 2)])


PROGRAMS = {
    "mlp_f32": Program(mlp, mlp_args, F32),
    "mlp_bf16": Program(mlp, lambda rng: mlp_args(rng, ml_dtypes.bfloat16), BF16),
    "convnet": Program(convnet, convnet_args, F32),
    "transformer_block": Program(transformer_block, transformer_args, F32_MATH),
    "scan": Program(scan, lambda rng: (normal(rng, 4), normal(rng, 10, 4)), F32_MATH),
    "while_loop": Program(while_loop, lambda rng: (normal(rng, 6),), F32_MATH),
    "while_loop_newton": Program(
        newton_sqrt, lambda rng: (rng.uniform(0.5, 4.0, 8).astype(np.float32),), F32
    ),
    "cond_true": Program(cond, lambda rng: (np.array(True), normal(rng, 5)), F32_MATH),
    "cond_false": Program(cond, lambda rng: (np.array(False), normal(rng, 5)), F32_MATH),
    "switch_0": Program(switch, lambda rng: (np.int32(0), normal(rng, 5)), F32_MATH),
    "switch_1": Program(switch, lambda rng: (np.int32(1), normal(rng, 5)), F32_MATH),
    "switch_2": Program(switch, lambda rng: (np.int32(2), normal(rng, 5)), F32_MATH),
    "switch_clamped": Program(switch, lambda rng: (np.int32(7), normal(rng, 5)), F32_MATH),
    "gelu_exact": Program(gelu_exact, lambda rng: (normal(rng, 64, scale=3.0),), F32_MATH),
    "sort_f32": Program(sort, lambda rng: (normal(rng, 4, 16),), EXACT),
    "sort_i32": Program(sort, lambda rng: (rng.integers(-20, 20, (4, 16)).astype(np.int32),), EXACT),
    "argsort": Program(argsort, lambda rng: (rng.integers(0, 5, (3, 12)).astype(np.int32),), EXACT),
    "top_k": Program(top_k, lambda rng: (normal(rng, 4, 16),), EXACT),
    "argmax": Program(argmax, lambda rng: (normal(rng, 6, 10),), EXACT),
    "cumsum_f32": Program(cumsum, lambda rng: (normal(rng, 12, 3),), F32),
    "cumsum_i32": Program(cumsum, lambda rng: (rng.integers(-9, 9, (12, 3)).astype(np.int32),), EXACT),
    "gather": Program(
        gather, lambda rng: (normal(rng, 10, 4), np.array([3, 0, 9, 3, 5], np.int32)), EXACT
    ),
    "scatter_add": Program(
        scatter_add,
        lambda rng: (normal(rng, 10, 4), np.array([1, 7, 1, 4], np.int32), normal(rng, 4, 4)),
        F32,
    ),
    "scatter_set": Program(
        scatter_set,
        lambda rng: (normal(rng, 10, 4), np.array([8, 2, 5], np.int32), normal(rng, 3, 4)),
        EXACT,
    ),
    "dropout": Program(dropout, lambda rng: (normal(rng, 8, 8),), EXACT),
    "random_bits": Program(random_bits, lambda rng: (np.array([0, 1234], np.uint32),), EXACT),
    "int_arith_i32": Program(
        int_arith,
        lambda rng: (
            rng.integers(-50, 50, (4, 6)).astype(np.int32),
            rng.choice([-7, -3, -1, 1, 2, 5], (4, 6)).astype(np.int32),
        ),
        EXACT,
    ),
    "bool_logic": Program(
        bool_logic,
        lambda rng: (rng.integers(0, 2, (4, 5)).astype(bool), rng.integers(0, 2, (4, 5)).astype(bool), normal(rng, 4, 5)),
        EXACT,
    ),
    "histogram2d": Program(
        histogram2d,
        lambda rng: tuple(rng.integers(-6, 6, 12).astype(np.int16) for _ in range(2)) + (rng.integers(0, 6, 12).astype(np.int16),),
        F32,
    ),
}


# --- export, import, run, compare ------------------------------------------------------------


def program_and_args(name):
    program = PROGRAMS[name]
    rng = np.random.default_rng(sum(map(ord, name)))  # a fixed seed per program
    return program, program.make_args(rng)


def jax_outputs(fn, args) -> list[np.ndarray]:
    return [np.asarray(leaf) for leaf in jax.tree.leaves(jax.jit(fn)(*args))]


def run_mlirxla(imported, args) -> list[np.ndarray]:
    assert imported.module.operation.verify()
    execution = reference.execute(imported.module, [np.asarray(a) for a in args])
    return [literals.to_numpy(value) for value in execution.outputs]


def assert_same(outputs, expected, tolerance, name):
    assert len(outputs) == len(expected), f"{name}: {len(outputs)} outputs, jax gives {len(expected)}"
    for index, (got, want) in enumerate(zip(outputs, expected)):
        what = f"{name} output {index}"
        assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, jax gives {want.dtype}"
        assert got.shape == want.shape, f"{what}: shape {got.shape}, jax gives {want.shape}"
        if tolerance is None or want.dtype.kind in "biu":
            np.testing.assert_array_equal(got, want, err_msg=what)
        else:
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), err_msg=what, **tolerance)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_text_export_matches_jax(name):
    program, args = program_and_args(name)
    expected = jax_outputs(program.fn, args)
    text = jax.jit(program.fn).lower(*args).as_text()
    imported = frontdoor.import_text(text, f"{name}.mlir", new_context())
    assert imported.form == "text"
    assert_same(run_mlirxla(imported, args), expected, program.tolerance, name)


@pytest.mark.parametrize("name", ["mlp_f32", "transformer_block", "while_loop", "gelu_exact", "top_k", "dropout"])
def test_portable_artifact_matches_jax(name):
    """`jax.export` serializes a portable artifact (VHLO bytecode) with its StableHLO version."""
    program, args = program_and_args(name)
    expected = jax_outputs(program.fn, args)
    exported = jax.export.export(jax.jit(program.fn))(*args)
    data = exported.mlir_module_serialized
    assert data.startswith(b"ML\xefR")
    imported = frontdoor.import_bytes(data, f"{name}.vhlo.bc", new_context())
    assert imported.form == "portable-artifact"
    assert imported.artifact_version is not None
    assert_same(run_mlirxla(imported, args), expected, program.tolerance, name)


@pytest.mark.parametrize("name", ["mlp_f32", "convnet", "scan"])
def test_mlir_bytecode_matches_jax(name):
    """Plain MLIR bytecode, as jaxlib's MLIR writes the lowered StableHLO module."""
    program, args = program_and_args(name)
    expected = jax_outputs(program.fn, args)
    module = jax.jit(program.fn).lower(*args).compiler_ir("stablehlo")
    buffer = io.BytesIO()
    module.operation.write_bytecode(buffer)
    imported = frontdoor.import_bytes(buffer.getvalue(), f"{name}.mlirbc", new_context())
    assert imported.form == "bytecode"
    assert_same(run_mlirxla(imported, args), expected, program.tolerance, name)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_cpu_backend_matches_jax(name):
    """Every program compiled by the cpu backend and run natively, held to JAX's CPU result
    (floats at least at the transcendental tolerance: both sides approximate exp and tanh,
    and BLAS sums in blocks). No program is expected to be refused: a refusal fails."""
    from mlirxla.runtime import driver

    program, args = program_and_args(name)
    expected = jax_outputs(program.fn, args)
    imported = frontdoor.import_text(jax.jit(program.fn).lower(*args).as_text(), f"{name}.mlir", new_context())
    execution = driver.execute(imported.module, [np.asarray(a) for a in args])
    tolerance = program.tolerance and {key: max(value, F32_MATH[key]) for key, value in program.tolerance.items()}
    with imported.module.context:
        outputs = [literals.to_numpy(value) for value in execution.outputs]
    assert_same(outputs, expected, tolerance, name)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_cpu_backend_thunks_run_together_touch_disjoint_memory(name):
    """The executor runs thunks that the dependency graph leaves unordered at the same time:
    no two of them may touch the same bytes while one of them writes. A loop or conditional
    is judged by what the thunks inside it touch (their kernels' scratch included), not by
    what it declares. A race shows up only now and then at run time; this finds it in the
    plan."""
    from mlirxla.runtime.client import Client
    from mlirxla.runtime.executor import dependency_graph, overlaps
    from mlirxla.runtime.thunks import ControlFlow, every_thunk

    def touched(thunk):
        inner = [t for t in every_thunk([thunk]) if not isinstance(t, ControlFlow)]
        writes = [s for t in inner for s in t.writes]
        reads = [s for t in inner for s in t.reads] + list(thunk.reads_and_writes if isinstance(thunk, ControlFlow) else ())
        return reads, writes

    program, args = program_and_args(name)
    thunks = Client().compile(jax.jit(program.fn).lower(*args).as_text()).executable.plan.thunks
    graph = dependency_graph(thunks)
    after = [set() for _ in thunks]
    for index in reversed(range(len(thunks))):
        for successor in graph[index].successors:
            after[index] |= {successor} | after[successor]
    slices = [touched(t) for t in thunks]
    for j, (later_reads, later_writes) in enumerate(slices):
        for i, (earlier_reads, earlier_writes) in enumerate(slices[:j]):
            if j in after[i]:
                continue
            clash = [(w.text(), x.text()) for w in earlier_writes for x in later_reads + later_writes if overlaps(w, x)]
            clash += [(w.text(), x.text()) for w in later_writes for x in earlier_reads if overlaps(w, x)]
            assert not clash, (f"{name}: {thunks[i].describe().splitlines()[0]} and {thunks[j].describe().splitlines()[0]} "
                               f"may run together and both touch {clash}")
