"""Loop fusions over f32 rows run as programs of the runtime library's row engine
(`backends/cpu/row_programs.py`, `row_engine.py`): no kernel compiled for them, results as
numpy's and as the generated kernel's they stand for."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax import lax

from mlirxla.backends.cpu import llvm_jit, row_programs, softmax_rows, thread_split
from mlirxla.runtime.client import Client


@pytest.fixture(autouse=True)
def on_jax_cpu():
    """jax's functions here run and lower on its cpu device (XLA:CPU, the reference), whatever
    platforms the process has: setting JAX_PLATFORMS at import instead left jax without the
    plugin for the files the same worker ran after this one."""
    with jax.default_device(jax.devices("cpu")[0]):
        yield


def layer_norm(x, scale, bias):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    variance = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) * lax.rsqrt(variance + 1e-5) * scale + bias


def layer_norm_plain(x):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    return (x - mean) * lax.rsqrt(jnp.mean((x - mean) ** 2, axis=-1, keepdims=True) + 1e-5)


def layer_norm_of_squares(x, scale, bias):
    """The variance as mean(x^2) - mean^2, the mean without keepdims."""
    mean = jnp.mean(x, axis=-1)
    variance = jnp.mean(x * x, axis=-1) - mean * mean
    return (x - mean[..., None]) / jnp.sqrt(variance[..., None] + 1e-5) * scale + bias


def rms_norm(x, scale):
    return x * lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * scale


def softmax(x):
    return jax.nn.softmax(x, axis=-1)


def log_softmax(x):
    return jax.nn.log_softmax(x, axis=-1)


def log_sum_exp_and_shifted(x):
    """A cross-entropy's pieces: per-row log-sum-exp and the shifted logits, two results."""
    top = jnp.max(x, axis=-1, keepdims=True)
    shifted = x - top
    return jnp.log(jnp.sum(jnp.exp(shifted), axis=-1)) + top[..., 0], shifted


def row_range(x):
    return jnp.max(x, axis=-1) - jnp.min(x, axis=-1) + jnp.abs(jnp.sum(jnp.tanh(x), axis=-1))


PROGRAMS = {
    "layer_norm": (layer_norm, lambda x: (x, *np.random.default_rng(1).standard_normal((2, x.shape[-1])).astype(np.float32))),
    "layer_norm_plain": (layer_norm_plain, lambda x: (x,)),
    "layer_norm_of_squares": (layer_norm_of_squares, lambda x: (x, *np.random.default_rng(2).standard_normal((2, x.shape[-1])).astype(np.float32))),
    "rms_norm": (rms_norm, lambda x: (x, np.random.default_rng(3).standard_normal(x.shape[-1]).astype(np.float32))),
    "softmax": (softmax, lambda x: (x,)),
    "log_softmax": (log_softmax, lambda x: (x,)),
    "log_sum_exp": (log_sum_exp_and_shifted, lambda x: (x,)),
    "row_range": (row_range, lambda x: (x,)),
}


@pytest.fixture
def compiled_kernels(monkeypatch):
    """The kernels compiled (their names)."""
    names = []
    compile_native = llvm_jit.compile_native
    monkeypatch.setattr(llvm_jit, "compile_native", lambda name, *rest: names.append(name) or compile_native(name, *rest))
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", "2")
    return names


def compile_and_run(function, arguments, directory):
    text = jax.jit(function).lower(*arguments).as_text()
    executable = Client(cache_dir=str(directory)).compile(text)
    return executable, [np.asarray(result) for result in executable.execute_numpy(list(arguments))]


@pytest.mark.parametrize("shape", [(1, 37), (5, 200), (3, 4, 1000), (2048, 40)])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_row_fusions_run_in_the_engine_as_numpy_and_the_generated_kernel(name, shape, compiled_kernels, monkeypatch, tmp_path):
    """Every form compiles no kernel (softmax's fusion set aside from its own library
    function), whatever the rows' length (odd, not a multiple of the vector width) and count
    (one row; many, split over the threads); the results match jax's on XLA and the
    generated kernel's."""
    function, arguments_of = PROGRAMS[name]
    monkeypatch.setattr(softmax_rows, "is_softmax", lambda op: False)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    arguments = arguments_of(x)
    _, got = compile_and_run(function, arguments, tmp_path / "engine")
    assert not compiled_kernels, compiled_kernels
    expected = jax.tree_util.tree_leaves(jax.jit(function)(*arguments))
    for ours, theirs in zip(got, expected):
        np.testing.assert_allclose(ours, np.asarray(theirs), rtol=2e-5, atol=2e-5)
    monkeypatch.setattr(row_programs, "row_program", lambda op: None)
    _, generated = compile_and_run(function, arguments, tmp_path / "generated")
    assert compiled_kernels
    for ours, theirs in zip(got, generated):
        np.testing.assert_allclose(ours, theirs, rtol=2e-6, atol=2e-6)


def test_a_large_row_program_splits_over_the_threads(compiled_kernels, tmp_path, monkeypatch):
    """A layer norm of many rows runs its program in row blocks on the threads (modelled as
    streaming from memory: from the shared cache, its 8 MiB would run whole)."""
    monkeypatch.setattr(thread_split, "last_level_cache_bytes", lambda: 0)
    x = np.random.default_rng(4).standard_normal((4096, 256)).astype(np.float32)
    arguments = PROGRAMS["layer_norm"][1](x)
    executable, (got,) = compile_and_run(layer_norm, arguments, tmp_path)
    assert not compiled_kernels and "sliced kernel x2" in executable.thunk_sequence()
    np.testing.assert_allclose(got, np.asarray(layer_norm(*arguments)), rtol=2e-5, atol=2e-5)


def test_layer_norm_program_makes_three_passes_over_the_rows():
    """jax's layer norm computes `x - mean` twice (two broadcasts of one mean); the program
    never writes it: the rows are read through the mean and rsqrt(var) (per-row values), so
    it makes the generated kernel's three passes (sum; sum of centered squares; centered,
    scaled, times scale plus offset) and writes only the result."""
    from mlirxla.backends.cpu.row_engine import WORDS
    from mlirxla.backends.cpu.row_programs import OPCODES_BY_CODE

    x = jax.ShapeDtypeStruct((64, 128), jnp.float32)
    vector = jax.ShapeDtypeStruct((128,), jnp.float32)
    text = jax.jit(layer_norm).lower(x, vector, vector).as_text()
    programs = []
    real = row_programs.row_program
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(row_programs, "row_program", lambda op: programs.append(real(op)) or programs[-1])
        Client().compile(text)
    (program,) = programs
    names = [OPCODES_BY_CODE[program.words[index]] for index in range(0, len(program.words), WORDS)]
    over_rows = [name for name in names if isinstance(name, tuple) and name[0] in ("reduce", "reduce_product", "chain", "unary_rows", "binary")
                 and name[2] != "per_row_per_row"]
    assert over_rows == [("reduce", "xhlo.add", False), ("reduce_product", "xhlo.add", True),
                         ("chain", "xhlo.multiply", "xhlo.add", "rows_rows", True)]


@pytest.mark.parametrize("function", [lambda x: jnp.sum(x, axis=0), lambda x: jnp.cumsum(x, axis=-1) / jnp.sum(x, axis=-1, keepdims=True)])
def test_fusions_outside_the_vocabulary_keep_their_kernel(function, compiled_kernels, tmp_path):
    """A reduction along another dimension, an op the engine lacks: a generated kernel."""
    x = np.random.default_rng(5).standard_normal((16, 40)).astype(np.float32)
    _, (got,) = compile_and_run(function, (x,), tmp_path)
    assert compiled_kernels
    np.testing.assert_allclose(got, np.asarray(function(x)), rtol=2e-5, atol=2e-5)
