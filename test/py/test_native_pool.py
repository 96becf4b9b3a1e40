"""The native thread pool (`runtime/native_pool.py`): every index of a job runs once, on the
parts it allows; a caller that finds the helpers busy runs its job alone; pooled GEMMs give
BLAS's answer, the same bits however their parts were run; OpenBLAS is held at one thread
while executions run and given back its own count after, and names the kernels it took."""

import ctypes
import os
import platform
import subprocess
import sys
import threading
from contextlib import contextmanager

import numpy as np
import pytest

from mlirxla.runtime import blas, native_pool
from mlirxla.runtime.client import Client
from mlirxla.runtime.threads import cpu_threads

JOB = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


class Recorder:
    """A job whose calls (index, part, thread) are recorded; index 0 sets `entered`, then
    waits for `hold`."""

    def __init__(self):
        self.calls, self.lock = [], threading.Lock()
        self.entered, self.hold = threading.Event(), threading.Event()
        self.function = JOB(self.call)

    def call(self, context, index, part):
        if index == 0:
            self.entered.set()
            self.hold.wait(10)
        with self.lock:
            self.calls.append((index, part, threading.current_thread().name))

    @property
    def address(self) -> int:
        return ctypes.cast(self.function, ctypes.c_void_p).value


@contextmanager
def helpers_busy():
    """The pool's helpers held by another caller's job for the body."""
    job = Recorder()
    holder = threading.Thread(target=native_pool.shared().run, args=(job.address, 0, 2, 2))
    holder.start()
    job.entered.wait(10)
    try:
        yield
    finally:
        job.hold.set()
        holder.join()


@pytest.mark.skipif(cpu_threads() < 2, reason="one thread: the pool has no helpers")
def test_every_index_runs_once_on_the_parts_the_job_allows():
    pool = native_pool.shared()
    for parts in (1, 2):
        job = Recorder()
        threading.Timer(0.05, job.hold.set).start()  # index 0 waits: a helper has time to take the others
        helped = pool.run(job.address, 0, 40, parts)
        assert sorted(index for index, _, _ in job.calls) == list(range(40))
        assert {part for _, part, _ in job.calls} == set(range(parts))
        assert helped == (parts > 1)
        assert all(name.startswith("mlirxla-split-") for _, part, name in job.calls if part > 0)


@pytest.mark.skipif(cpu_threads() < 2, reason="one thread: the pool has no helpers")
def test_a_job_records_the_cpus_its_caller_and_helpers_run_on():
    """The caller's CPU and a bit for each helper's: a spinning helper yields only on its
    caller's CPU, and a waiting caller only to a helper on its own (a yield on a CPU shared
    with another process gave that process the core for a time slice, and a kernel split over
    two threads ran as slow as on one)."""
    pool = native_pool.shared()
    job = Recorder()
    threading.Timer(0.05, job.hold.set).start()
    pool.run(job.address, 0, 40, 2)
    assert 0 <= pool.words[native_pool.Slot.CALLER_CPU] < os.cpu_count()
    helper_bits = pool.words[native_pool.Slot.HELPER_CPUS]
    assert helper_bits != 0 and helper_bits & ~((1 << min(os.cpu_count(), 64)) - 1) == 0


def test_a_caller_that_finds_the_helpers_busy_runs_its_job_alone():
    job = Recorder()
    job.hold.set()
    with helpers_busy():
        assert native_pool.shared().run(job.address, 0, 10, 2) is False
    assert sorted(index for index, _, _ in job.calls) == list(range(10))
    assert {(part, name) for _, part, name in job.calls} == {(0, threading.current_thread().name)}


@pytest.mark.parametrize("element", ["f32", "f64"])
@pytest.mark.parametrize("m, n, k, transpose_a, transpose_b", [
    (300, 200, 100, False, False),  # rows split
    (100, 300, 200, False, True),  # columns split
    (257, 63, 129, True, False),
    (8, 700, 400, True, True),
    (32, 32, 32, False, False),  # below the split: BLAS on the caller
])
def test_a_pooled_gemm_gives_blas_answer_and_the_same_bits_run_alone(element, m, n, k, transpose_a, transpose_b):
    dtype = np.float32 if element == "f32" else np.float64
    rng = np.random.default_rng(3)
    a = rng.standard_normal((k, m) if transpose_a else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if transpose_b else (k, n)).astype(dtype)
    gemm = native_pool.pooled_gemm(element)

    def product() -> np.ndarray:
        out = np.full((m, n), np.nan, dtype)
        gemm(blas.ROW_MAJOR, blas.TRANSPOSE if transpose_a else blas.NO_TRANSPOSE,
             blas.TRANSPOSE if transpose_b else blas.NO_TRANSPOSE, m, n, k, 1.0, a.ctypes.data, a.shape[1],
             b.ctypes.data, b.shape[1], 0.0, out.ctypes.data, n)
        return out

    with blas.one_thread():
        shared = product()
        with helpers_busy():
            alone = product()  # every part on this thread
    want = (a.T if transpose_a else a) @ (b.T if transpose_b else b)
    np.testing.assert_allclose(shared, want, rtol=1e-4 if element == "f32" else 1e-10, atol=1e-4 if element == "f32" else 1e-10)
    assert shared.tobytes() == alone.tobytes()


def openblas_threads() -> tuple[int, int]:
    """numpy's OpenBLAS thread count, and scipy's (its LAPACK's)."""
    numpy_library, scipy_library = blas._library(), blas.scipy_library()
    numpy_library.scipy_openblas_get_num_threads64_.restype = ctypes.c_int
    scipy_library.scipy_openblas_get_num_threads.restype = ctypes.c_int
    return numpy_library.scipy_openblas_get_num_threads64_(), scipy_library.scipy_openblas_get_num_threads()


@pytest.mark.parametrize("gemms, lapack", [(True, False), (True, True), (False, True)])
def test_executions_hold_openblas_at_one_thread_and_give_its_count_back(gemms, lapack):
    """numpy's OpenBLAS for an execution with GEMMs, scipy's (its LAPACK's, which its wheel
    ships) for one with small LAPACK calls; each library left as it is otherwise."""
    own = openblas_threads()
    held = (1 if gemms else own[0], 1 if lapack else own[1])
    hold = blas.one_thread(gemms, lapack)
    with hold:
        assert openblas_threads() == held
        with blas.one_thread(gemms, lapack):  # a nested or concurrent execution
            assert openblas_threads() == held
        assert openblas_threads() == held
    assert openblas_threads() == own
    with hold:  # the executable's own context, entered again on its next call
        assert openblas_threads() == held
    assert openblas_threads() == own


DOT = """func.func @main(%x: tensor<64x500xf32>, %w: tensor<500x64xf32>) -> tensor<64x64xf32> {
  %r = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<64x500xf32>, tensor<500x64xf32>) -> tensor<64x64xf32>
  return %r : tensor<64x64xf32>
}"""


@pytest.mark.parametrize("threads, in_parts", [("2", True), ("1", False)])
def test_a_single_devices_gemms_run_in_parts_over_several_threads(monkeypatch, threads, in_parts):
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", threads)
    executable = Client().compile(DOT)
    assert (" NN in parts " in executable.thunk_sequence()) == in_parts
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((64, 500)).astype(np.float32), rng.standard_normal((500, 64)).astype(np.float32)
    np.testing.assert_allclose(executable.execute_numpy([x, w])[0], x @ w, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="OpenBLAS's x86-64 kernel names")
def test_openblas_names_the_kernels_it_took():
    """What the benchmarks' machine line prints: the core `OPENBLAS_CORETYPE` asked for."""
    script = "from mlirxla.runtime import blas; print(blas.core_name())"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=dict(os.environ, OPENBLAS_CORETYPE="Haswell"), timeout=120)
    assert done.stdout.split() == ["Haswell"], done.stderr


EIGH_OF = """func.func @main(%a: tensor<{n}x{n}xf32>) -> (tensor<{n}x{n}xf32>, tensor<{n}xf32>, tensor<i32>) {{
  %e:3 = stablehlo.custom_call @lapack_ssyevd_ffi(%a) {{mhlo.backend_config = {{mode = 86 : ui8, uplo = 76 : ui8}},
      operand_layouts = [dense<[0, 1]> : tensor<2xindex>],
      result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>]}}
      : (tensor<{n}x{n}xf32>) -> (tensor<{n}x{n}xf32>, tensor<{n}xf32>, tensor<i32>)
  return %e#0, %e#1, %e#2 : tensor<{n}x{n}xf32>, tensor<{n}xf32>, tensor<i32>
}}"""


def test_scipys_openblas_runs_one_thread_for_small_lapack_calls_only():
    """An execution's LAPACK calls on small matrices hold scipy's OpenBLAS at one thread (its
    threads cost them more than they give, and fought the pool's helper); one on a matrix of
    512 x 512 or more keeps its threads."""
    from mlirxla.runtime.executable import THREADED_LAPACK_FROM

    assert THREADED_LAPACK_FROM == 512 * 512
    small, large = (Client().compile(EIGH_OF.format(n=n)).executable for n in (64, 512))
    assert small.small_lapack and not large.small_lapack
    assert not Client().compile(DOT).executable.small_lapack
