"""The runtime under load: one executable shared by 8 threads gives the results of serial runs,
the JAX plugin under `jax.jit` from several threads too; 100,000 executions grow resident
memory by less than 10 MiB after a warm-up (through the runtime and through the plugin); and
the compile cache under 4 processes compiling the same and different modules at once never
serves a wrong or torn entry.
"""

import gc
import multiprocessing
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from mlirxla.runtime import executor
from mlirxla.runtime.client import Client

THREADS = 8
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
RSS_GROWTH_LIMIT_BYTES = 10 << 20
EXECUTIONS = 100_000
WARM_UP_EXECUTIONS = 2_000

# Four GEMMs, two epilogues and a reduction: the executor runs them as a dependency graph on
# its thread pool (not the sequential path; the GEMMs are too small to run in parts over the
# native pool, which would keep it sequential), so concurrent executions share the pool too.
BRANCHES = """func.func @main(%x: tensor<48x48xf32>, %w1: tensor<48x48xf32>, %w2: tensor<48x48xf32>, %w3: tensor<48x48xf32>, %w4: tensor<48x48xf32>) -> (tensor<48x48xf32>, tensor<48xf32>) {
  %a = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] : (tensor<48x48xf32>, tensor<48x48xf32>) -> tensor<48x48xf32>
  %b = stablehlo.dot_general %x, %w2, contracting_dims = [1] x [0] : (tensor<48x48xf32>, tensor<48x48xf32>) -> tensor<48x48xf32>
  %c = stablehlo.dot_general %x, %w3, contracting_dims = [1] x [0] : (tensor<48x48xf32>, tensor<48x48xf32>) -> tensor<48x48xf32>
  %d = stablehlo.dot_general %x, %w4, contracting_dims = [1] x [0] : (tensor<48x48xf32>, tensor<48x48xf32>) -> tensor<48x48xf32>
  %ta = stablehlo.tanh %a : tensor<48x48xf32>
  %tb = stablehlo.logistic %b : tensor<48x48xf32>
  %tc = stablehlo.sine %c : tensor<48x48xf32>
  %td = stablehlo.cosine %d : tensor<48x48xf32>
  %s1 = stablehlo.add %ta, %tb : tensor<48x48xf32>
  %s2 = stablehlo.multiply %tc, %td : tensor<48x48xf32>
  %e = stablehlo.dot_general %s1, %s2, contracting_dims = [1] x [0] : (tensor<48x48xf32>, tensor<48x48xf32>) -> tensor<48x48xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<48x48xf32>, tensor<f32>) -> tensor<48xf32>
  return %e, %r : tensor<48x48xf32>, tensor<48xf32>
}
"""

SMALL = """func.func @main(%a: tensor<8x16xf32>, %b: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = stablehlo.add %a, %b : tensor<8x16xf32>
  %1 = stablehlo.tanh %0 : tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}
"""


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE_BYTES


def growth_over(calls: int, call) -> tuple[int, float]:
    """(bytes resident memory grew by, seconds taken) over `calls` calls of `call`, after a warm-up."""
    for _ in range(WARM_UP_EXECUTIONS):
        call()
    gc.collect()
    before, started = resident_bytes(), time.perf_counter()
    for _ in range(calls):
        call()
    gc.collect()
    return resident_bytes() - before, time.perf_counter() - started


def branch_arguments(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((48, 48)).astype(np.float32) * 0.2 for _ in range(5)]


def test_threads_sharing_an_executable_get_the_serial_results(monkeypatch):
    monkeypatch.setattr(executor, "SEQUENTIAL_BYTES_BELOW", 0)  # a graph whatever bytes it moves
    executable = Client().compile(BRANCHES)
    assert executable.executable.graph is not None, "the program should run as a graph on the pool"
    inputs = [branch_arguments(seed) for seed in range(THREADS)]
    expected = [executable.execute_numpy(arguments) for arguments in inputs]
    start = threading.Barrier(THREADS)

    def run(thread: int) -> list:
        start.wait()
        return [executable.execute_numpy(inputs[thread]) for _ in range(40)]

    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(run, range(THREADS)))
    for thread, runs in enumerate(results):
        for outputs in runs:
            for output, serial in zip(outputs, expected[thread]):
                np.testing.assert_array_equal(output, serial, err_msg=f"thread {thread}")


def test_resident_memory_stays_flat_over_100000_executions():
    executable = Client().compile(SMALL)
    a, b = np.ones((8, 16), np.float32), np.full((8, 16), 0.5, np.float32)
    growth, seconds = growth_over(EXECUTIONS, lambda: executable.execute_numpy([a, b]))
    print(f"runtime: resident memory grew {growth / (1 << 20):.2f} MiB over {EXECUTIONS} executions ({seconds:.1f} s)")
    assert growth < RSS_GROWTH_LIMIT_BYTES, f"grew {growth / (1 << 20):.1f} MiB over {EXECUTIONS} executions"


# --- through the JAX plugin ----------------------------------------------------------------


@pytest.fixture(scope="module")
def mlirxla_device():
    jax = pytest.importorskip("jax")
    return jax.devices("mlirxla")[0]


@pytest.mark.jax
def test_jit_from_several_threads_gets_the_serial_results(mlirxla_device):
    import jax
    import jax.numpy as jnp

    @jax.jit
    def layer(x, w):
        return jnp.tanh(x @ w).sum(axis=0)

    rng = np.random.default_rng(0)
    inputs = [(jax.device_put(rng.standard_normal((32, 48)).astype(np.float32), mlirxla_device),
               jax.device_put(rng.standard_normal((48, 16)).astype(np.float32), mlirxla_device)) for _ in range(THREADS)]
    start = threading.Barrier(THREADS)

    def run(thread: int) -> list:
        start.wait()  # the first calls race to compile, the others to execute
        return [np.asarray(layer(*inputs[thread])) for _ in range(25)]

    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(run, range(THREADS)))
    for thread, runs in enumerate(results):
        serial = np.asarray(layer(*inputs[thread]))
        on_cpu = np.asarray(layer(*(jax.device_put(np.asarray(value), jax.devices("cpu")[0]) for value in inputs[thread])))
        np.testing.assert_allclose(serial, on_cpu, rtol=1e-4, atol=1e-4)
        for output in runs:
            np.testing.assert_array_equal(output, serial, err_msg=f"thread {thread}")


@pytest.mark.jax
def test_resident_memory_stays_flat_over_100000_jitted_calls(mlirxla_device):
    import jax
    import jax.numpy as jnp

    @jax.jit
    def small(a, b):
        return jnp.tanh(a + b)

    a = jax.device_put(np.ones((8, 16), np.float32), mlirxla_device)
    b = jax.device_put(np.full((8, 16), 0.5, np.float32), mlirxla_device)
    growth, seconds = growth_over(EXECUTIONS, lambda: small(a, b).block_until_ready())
    print(f"plugin: resident memory grew {growth / (1 << 20):.2f} MiB over {EXECUTIONS} jitted calls ({seconds:.1f} s)")
    assert growth < RSS_GROWTH_LIMIT_BYTES, f"grew {growth / (1 << 20):.1f} MiB over {EXECUTIONS} jitted calls"


# --- the compile cache under 4 processes ---------------------------------------------------

PROCESSES = 4
SHARED_MODULES = 3  # every process compiles these; each also compiles one of its own


def scaled_tanh(scale: int) -> str:
    """A module per `scale`: the outputs tell which module's entry a compile was served."""
    return f"""func.func @main(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {{
  %c = stablehlo.constant dense<{scale}.0> : tensor<4x8xf32>
  %0 = stablehlo.multiply %a, %c : tensor<4x8xf32>
  %1 = stablehlo.tanh %0 : tensor<4x8xf32>
  %2 = stablehlo.add %1, %c : tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}}
"""


CACHE_ARGUMENT = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)


def modules_of(process: int) -> list[int]:
    return [*range(SHARED_MODULES), SHARED_MODULES + process]


def compile_with_the_cache(process: int, cache_dir: str, start, results) -> None:
    """Compile this process's modules in a shuffled order, twice: first into the empty cache (the
    writers race), then again once every process is done writing (the readers race)."""
    client = Client(cache_dir=cache_dir)
    order = modules_of(process)
    served = []
    for round_ in ("cold", "warm"):
        random.Random(process).shuffle(order)
        start.wait()
        for module in order:
            hits = client.cache.hits
            outputs = client.compile(scaled_tanh(module)).execute_numpy([CACHE_ARGUMENT])
            served.append((round_, module, client.cache.hits > hits, outputs[0]))
    results.put((process, served, client.cache.corrupted))


@pytest.mark.slow
def test_the_compile_cache_under_four_processes_serves_only_right_entries(tmp_path):
    spawn = multiprocessing.get_context("spawn")
    start, results = spawn.Barrier(PROCESSES, timeout=300), spawn.Queue()
    processes = [spawn.Process(target=compile_with_the_cache, args=(process, str(tmp_path), start, results))
                 for process in range(PROCESSES)]
    for process in processes:
        process.start()
    reports = [results.get(timeout=600) for _ in processes]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    fresh = Client()
    expected = {module: fresh.compile(scaled_tanh(module)).execute_numpy([CACHE_ARGUMENT])[0]
                for module in range(SHARED_MODULES + PROCESSES)}
    for process, served, corrupted in reports:
        assert corrupted == 0, f"process {process} found a torn entry"
        for round_, module, hit, output in served:
            np.testing.assert_array_equal(output, expected[module], err_msg=f"process {process}, module {module}, {round_}")
            assert hit or round_ == "cold", f"process {process} compiled module {module} again in the warm round"
    entries = sorted(os.listdir(tmp_path))
    assert len(entries) == SHARED_MODULES + PROCESSES and not any(name.startswith(".staging-") for name in entries)
