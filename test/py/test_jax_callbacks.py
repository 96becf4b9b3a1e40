"""Host callbacks on the plugin: `jax.pure_callback` and `jax.experimental.io_callback`
(ordered and unordered) under jit, vmap and grad, compared with jax's own cpu backend in the
same process; their results written with the declared shapes and dtypes, effects in program
order, and errors raised inside a callback reaching the caller while the process goes on.
"""

import os
import subprocess
import sys
import time

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax.experimental import io_callback  # noqa: E402

from .conftest import printed_by_jax_on  # noqa: E402

pytestmark = pytest.mark.jax

X = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)


@pytest.fixture(scope="module")
def devices():
    try:
        return jax.devices("mlirxla")[0], jax.devices("cpu")[0]
    except RuntimeError as error:
        pytest.fail(f"the mlirxla plugin did not register: {error}")


def on(device, function, *arguments):
    with jax.default_device(device):
        return jax.jit(function)(*arguments)


def assert_same_as_cpu(devices, function, *arguments):
    mlirxla, cpu = devices
    got, expected = on(mlirxla, function, *arguments), on(cpu, function, *arguments)
    assert jax.tree.structure(got) == jax.tree.structure(expected)
    for leaf, want in zip(jax.tree.leaves(got), jax.tree.leaves(expected)):
        assert leaf.devices() == {mlirxla}
        assert leaf.dtype == want.dtype and leaf.shape == want.shape
        np.testing.assert_allclose(np.asarray(leaf), np.asarray(want), rtol=1e-6)


def host_statistics(x):
    x = np.asarray(x)
    return {"mean": np.mean(x, axis=-1), "argmax": np.argmax(x, axis=-1).astype(np.int32), "positive": x > 0}


def statistics_shapes(x):
    rows = x.shape[:-1]
    return {"mean": jax.ShapeDtypeStruct(rows, jnp.float32), "argmax": jax.ShapeDtypeStruct(rows, jnp.int32),
            "positive": jax.ShapeDtypeStruct(x.shape, jnp.bool_)}


def test_pure_callback_under_jit(devices):
    def program(x):
        statistics = jax.pure_callback(host_statistics, statistics_shapes(x), jnp.sin(x))
        return statistics["mean"] * 2, statistics["argmax"], jnp.where(statistics["positive"], x, 0.0)

    assert_same_as_cpu(devices, program, X)


def test_callback_gets_jax_arrays_on_the_cpu_device(devices):
    """As jax's callbacks do on cpu: its arguments are jax arrays placed on the cpu device."""
    mlirxla, cpu = devices
    placed = []

    def record(x):
        placed.append((type(x).__name__, x.devices()))
        return x

    on(mlirxla, lambda x: jax.pure_callback(record, jax.ShapeDtypeStruct(x.shape, x.dtype), x), X)
    assert placed == [("ArrayImpl", {cpu})]


@pytest.mark.parametrize("vmap_method", ["sequential", "expand_dims"])
def test_pure_callback_under_vmap(devices, vmap_method):
    """sequential: one call per row (a loop in the program); expand_dims: one call on the batch."""
    mlirxla, _ = devices
    calls = []

    def host_norm(row):
        calls.append(np.shape(row))
        return np.sqrt(np.sum(np.square(row), axis=-1, keepdims=True)).astype(np.float32)

    def norm(row):
        return jax.pure_callback(host_norm, jax.ShapeDtypeStruct((1,), jnp.float32), row, vmap_method=vmap_method)

    assert_same_as_cpu(devices, jax.vmap(norm), X)
    calls.clear()
    on(mlirxla, jax.vmap(norm), X)
    assert calls == ([(4,)] * 3 if vmap_method == "sequential" else [(3, 4)])


def test_grad_through_a_pure_callback_with_a_custom_jvp(devices):
    @jax.custom_jvp
    def host_sin(x):
        return jax.pure_callback(np.sin, jax.ShapeDtypeStruct(x.shape, x.dtype), x, vmap_method="expand_dims")

    @host_sin.defjvp
    def host_sin_jvp(primals, tangents):
        (x,), (dx,) = primals, tangents
        cosine = jax.pure_callback(np.cos, jax.ShapeDtypeStruct(x.shape, x.dtype), x, vmap_method="expand_dims")
        return host_sin(x), cosine * dx

    def loss(x):
        return jnp.sum(host_sin(x) ** 2)

    assert_same_as_cpu(devices, jax.grad(loss), X)
    np.testing.assert_allclose(np.asarray(on(devices[0], jax.grad(loss), X)), 2 * np.sin(X) * np.cos(X), rtol=1e-5)


def test_io_callback_results_and_effects(devices):
    """Unordered, ordered, and with no result: each runs once per call, results as declared."""
    mlirxla, _ = devices
    seen = []

    def log_and_count(x):
        seen.append(np.asarray(x).copy())
        return np.int32(len(seen))

    def program(x):
        count = io_callback(log_and_count, jax.ShapeDtypeStruct((), jnp.int32), x)
        ordered = io_callback(lambda v: np.asarray(v) * 2, jax.ShapeDtypeStruct(x.shape, x.dtype), x + 1, ordered=True)
        io_callback(lambda v: seen.append(("nothing back", np.asarray(v).sum())), None, x)
        return count, ordered

    count, ordered = on(mlirxla, program, X)
    assert int(count) == 1 and ordered.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(ordered), (X + 1) * 2)
    np.testing.assert_array_equal(seen[0], X)
    assert seen[1] == ("nothing back", pytest.approx(float(X.sum())))


@pytest.mark.parametrize("ordered", [False, True])
def test_io_callback_results_inside_a_loop_sum_as_on_the_cpu(devices, ordered):
    """The callback's result and the loop's carried values live in the same steps: they must
    not share memory (it once came back in the carried sum's buffer, 16 instead of 21)."""
    def program():
        def step(i, total):
            return total + io_callback(lambda k: np.int32(2 * k), jax.ShapeDtypeStruct((), jnp.int32), i, ordered=ordered)
        return jax.lax.fori_loop(0, 5, step, 1)

    assert int(on(devices[0], program)) == int(on(devices[1], program)) == 21


def test_io_callback_with_only_empty_results_still_runs(devices):
    """Its results take no memory, its effect still happens."""
    mlirxla, _ = devices
    seen = []

    def record(x):
        seen.append(float(np.asarray(x).sum()))
        return np.zeros((0,), np.float32)

    empty = on(mlirxla, lambda x: io_callback(record, jax.ShapeDtypeStruct((0,), jnp.float32), x, ordered=True), X)
    assert empty.shape == (0,) and seen == [pytest.approx(float(X.sum()))]


def test_ordered_effects_keep_program_order_within_and_across_calls(devices):
    """Eight ordered callbacks on one shared value, free to run at once on the thread pool but
    for their ordering, the earlier ones slower: they still run in program order, call after
    call (an ahead-of-time compiled function threads the token too)."""
    mlirxla, _ = devices
    order = []

    def step(index):
        def callback(value):
            time.sleep(0.002 * (8 - index))
            order.append(index)
            return np.asarray(value) + index
        return callback

    def program(x):
        shared = jnp.sin(x) * 2
        return [io_callback(step(i), jax.ShapeDtypeStruct(x.shape, x.dtype), shared, ordered=True) for i in range(8)]

    with jax.default_device(mlirxla):
        compiled = jax.jit(program).lower(X).compile()
        for _ in range(3):
            results = compiled(X)
        jax.jit(program)(X)
    assert order == list(range(8)) * 4
    np.testing.assert_allclose(np.asarray(results[5]), np.sin(X) * 2 + 5, rtol=1e-6)


def test_exception_inside_a_callback_reaches_the_caller(devices):
    mlirxla, cpu = devices

    def fails(x):
        raise ValueError("the host refuses\nsecond line")

    def program(x):
        return jax.pure_callback(fails, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    for device in (mlirxla, cpu):
        with pytest.raises(jax.errors.JaxRuntimeError, match="the host refuses"):
            on(device, program, X).block_until_ready()
    with pytest.raises(jax.errors.JaxRuntimeError) as raised:
        on(mlirxla, program, X)
    assert str(raised.value) == ("INTERNAL: mlirxla: CallbackError: jax.pure_callback "
                                 "'test_exception_inside_a_callback_reaches_the_caller.<locals>.fails' raised ValueError: "
                                 "the host refuses")
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"io_callback '.*fails' raised ValueError"):
        on(mlirxla, lambda x: io_callback(fails, jax.ShapeDtypeStruct(x.shape, x.dtype), x, ordered=True), X)
    np.testing.assert_array_equal(np.asarray(on(mlirxla, lambda x: x + 1, X)), X + 1)


@pytest.mark.parametrize("returned, described", [
    (np.zeros(3, np.float32), "float32[3] as result 0, the program declares float32[3, 4]"),
    (np.zeros((3, 4), np.int32), "int32[3, 4] as result 0, the program declares float32[3, 4]"),
    ((), "0 value(s), the program declares 1"),
])
def test_wrong_results_name_the_callback(devices, returned, described):
    mlirxla, _ = devices

    def wrong(x):
        return returned

    with pytest.raises(jax.errors.JaxRuntimeError) as raised:
        on(mlirxla, lambda x: jax.pure_callback(wrong, jax.ShapeDtypeStruct(x.shape, x.dtype), x), X)
    message = str(raised.value)
    assert message.startswith("INVALID_ARGUMENT: jax.pure_callback 'test_wrong_results_name_the_callback.<locals>.wrong' returned ")
    assert message.endswith(described) and "\n" not in message
    np.testing.assert_array_equal(np.asarray(on(mlirxla, lambda x: x * 2, X)), X * 2)


def test_float64_results_are_canonicalized_as_jax_does(devices):
    """Without x64 jax takes a callback's float64 for the float32 it declares, on cpu and here."""
    assert_same_as_cpu(devices, lambda x: jax.pure_callback(lambda v: np.asarray(v, np.float64) / 3,
                                                            jax.ShapeDtypeStruct(x.shape, jnp.float32), x), X)


WITHOUT_CPU = """
import jax, numpy as np
from jax.experimental import io_callback
seen = []
def program(x):
    y = jax.pure_callback(lambda v: np.cos(v), jax.ShapeDtypeStruct(x.shape, x.dtype), x)
    io_callback(lambda v: seen.append((type(v).__name__, [d.platform for d in v.devices()], float(v.sum()))), None, y,
                ordered=True)
    return y + 1
result = jax.jit(program)(np.zeros(3, np.float32))
assert seen == [("ArrayImpl", ["mlirxla"], 3.0)], seen
print(np.asarray(result).tolist())
"""


def test_callbacks_without_a_cpu_backend_get_jax_arrays_on_mlirxla():
    """JAX_PLATFORMS=mlirxla leaves jax no cpu device to put the arguments on (its own
    callbacks fail there); mlirxla's put them on its first device, as jax's put them on the
    cpu device, so that the callback gets jax arrays it can compute with."""
    environment = dict(os.environ, JAX_PLATFORMS="mlirxla")
    done = subprocess.run([sys.executable, "-c", WITHOUT_CPU], env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[2.0, 2.0, 2.0]"


PRINTS_WITHOUT_CPU = """
import jax, jax.numpy as jnp
jax.debug.print("eager {}", jnp.arange(3))
jax.vmap(lambda v: jax.debug.print("mapped {}", v))(jnp.arange(2))
jax.jit(lambda: jax.lax.fori_loop(0, 4, lambda i, _: jax.debug.print("step {}", i), None, unroll=2))()
jax.effects_barrier()
"""


def test_debug_prints_outside_jit_and_in_a_loop_without_results():
    """Outside jit, jax's own debug.print needs a cpu device (JAX_PLATFORMS=mlirxla has
    none): it runs as a one-op program instead. A loop whose only effect is a print, its
    results unused, is kept (dead code elimination had dropped it with its prints)."""
    environment = dict(os.environ, JAX_PLATFORMS="mlirxla")
    done = subprocess.run([sys.executable, "-c", PRINTS_WITHOUT_CPU], env=environment, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["eager [0 1 2]", "mapped 0", "mapped 1", "step 0", "step 1", "step 2", "step 3"]


def host_halves_and_counts(calls):
    """A primitive lowered through jax's public `mlir.emit_python_callback`, as libraries write
    their own host primitives: numpy halves its operand and records the call."""
    from jax.extend import core as jax_core
    from jax.interpreters import mlir

    primitive = jax_core.Primitive("host_halves")
    primitive.def_abstract_eval(lambda x: x)

    def halve(x):
        calls.append(type(x))
        return (np.asarray(x / 2, x.dtype),)

    def lowering(context, x):
        results, _, _ = mlir.emit_python_callback(context, halve, None, [x], context.avals_in, context.avals_out,
                                                  has_side_effect=False)
        return results

    mlir.register_lowering(primitive, lowering)
    return primitive


def test_emit_python_callback_lowers_on_mlirxla(devices):
    """jax's helper refused every platform but cpu, cuda, rocm and tpu."""
    calls = []
    primitive = host_halves_and_counts(calls)
    assert_same_as_cpu(devices, lambda x: primitive.bind(jnp.sin(x)) + 1, X)
    assert calls == [np.ndarray, np.ndarray]  # numpy arrays on every platform


def test_checkify_check_under_jit_raises_at_run_time(devices):
    """`checkify.check` staged without `checkify.checkify` (jax's unsafe runtime errors) lowers
    to a host callback, which jax registers for cpu and gpu only."""
    from jax._src import config as jax_config
    from jax.experimental import checkify

    mlirxla, cpu = devices

    def program(x):
        checkify.check(jnp.all(x > -3), "x must exceed -3, got {}", x)
        return jnp.exp(x)

    with jax_config.xla_runtime_errors(True):
        assert_same_as_cpu(devices, program, X)
        for device in (mlirxla, cpu):
            with pytest.raises(jax.errors.JaxRuntimeError, match=r"x must exceed -3, got \[\[-4"):
                on(device, program, X - 2).block_until_ready()


EAGER_WITHOUT_CPU = """
import jax, jax.numpy as jnp
seen = []
jax.debug.callback(lambda v: seen.append((type(v).__name__, v.devices() == set(jax.devices()), int(v.sum()))),
                   jnp.arange(4))
def refuse(v):
    raise KeyError("the host refuses")
try:
    jax.debug.callback(refuse, jnp.ones(2))
except KeyError as error:
    seen.append(str(error))
print(seen)
jax.debug.callback(lambda: exit(3))
"""


def test_eager_debug_callbacks_without_a_cpu_backend_run_in_the_caller():
    """Outside jit, as jax's own implementation does: the callback gets jax arrays (here on the
    mlirxla device) and what it raises reaches the caller unchanged, SystemExit included
    (`jax.debug.breakpoint`'s quit); it had become an INTERNAL runtime error."""
    environment = dict(os.environ, JAX_PLATFORMS="mlirxla")
    done = subprocess.run([sys.executable, "-c", EAGER_WITHOUT_CPU], env=environment, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 3, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[('ArrayImpl', True, 6), \"'the host refuses'\"]"


def test_buffer_callback_fills_its_outputs_in_place(devices):
    """jax lowers `buffer_callback` for cpu, cuda and rocm only."""
    from jax.experimental import buffer_callback

    def add_into(context, out, x, *, y):
        assert context.stage == buffer_callback.ExecutionStage.EXECUTE
        assert out.writeable and not x.writeable and x.shape == out.shape
        result = np.asarray(out)
        result[...] = np.asarray(x)
        result += np.from_dlpack(y)

    add = buffer_callback.buffer_callback(add_into, jax.ShapeDtypeStruct(X.shape[1:], X.dtype), vmap_method="sequential")
    assert_same_as_cpu(devices, lambda x: jax.vmap(lambda row: add(row, y=jnp.cos(row)))(x) * 2, X)

    def same_memory(context, out, x):
        np.asarray(out)[0] += np.asarray(x).ctypes.data == np.asarray(out).ctypes.data

    aliased = buffer_callback.buffer_callback(same_memory, jax.ShapeDtypeStruct(X.shape, X.dtype),
                                              input_output_aliases={0: 0})
    assert_same_as_cpu(devices, aliased, X)


ONCE_OVER_DEVICES = """
import jax, jax.numpy as jnp
from jax.experimental import io_callback
from jax.sharding import NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((4,), ("x",))
calls = []
@jax.jit
def f(x):
    jax.debug.print("x {}", x)
    io_callback(lambda v: calls.append(v.shape), None, x)
    return x * 2
out = f(jax.device_put(jnp.arange(8.0), NamedSharding(mesh, P("x"))))
jax.effects_barrier()
print("calls", calls, out.tolist())
"""


@pytest.mark.parametrize("platform", ["cpu", "mlirxla"])
def test_callbacks_without_results_run_once_in_a_jit_over_several_devices(platform):
    """jax gives them `{maximal device=0}`: printed once, with the whole value, not once per device."""
    assert printed_by_jax_on(platform, 4, ONCE_OVER_DEVICES) == ["x [0. 1. 2. 3. 4. 5. 6. 7.]",
                                                "calls [(8,)] [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0]"]


RESULTS_ONCE_OVER_DEVICES = """
import jax, jax.numpy as jnp, numpy as np
from jax.experimental import io_callback
from jax.sharding import NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((4,), ("x",))
calls = []
def tripled(v):
    calls.append(("tripled", v.shape))
    return np.asarray(v * 3, np.float32)
def negated(v):
    calls.append(("negated", v.shape))
    return np.asarray(-v, np.float32)
def plus_one(v):
    calls.append(("plus_one", v.shape))
    return np.asarray(v + 1, np.float32)
@jax.jit
def f(x):
    like = jax.ShapeDtypeStruct(x.shape, x.dtype)
    a = io_callback(tripled, like, x)
    b = io_callback(negated, like, jnp.sin(x))
    return jax.pure_callback(plus_one, like, a) * 2 + b
x = jnp.arange(16.0).reshape(8, 2)
out = f(jax.device_put(x, NamedSharding(mesh, P("x"))))
np.testing.assert_allclose(np.asarray(out), (np.asarray(x) * 3 + 1) * 2 - np.sin(np.asarray(x)), rtol=1e-6)
print(sorted(calls))
"""


@pytest.mark.parametrize("platform", ["cpu", "mlirxla"])
def test_callbacks_with_results_run_once_in_a_jit_over_several_devices(platform):
    """One device runs each callback on the whole value and the others take its results (two
    independent io_callbacks, which every device must meet in the same order, and a pure_callback)."""
    assert printed_by_jax_on(platform, 4, RESULTS_ONCE_OVER_DEVICES)[-1] == "[('negated', (8, 2)), ('plus_one', (8, 2)), ('tripled', (8, 2))]"
