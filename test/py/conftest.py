"""Shared fixtures: a fresh MLIR context per test, the paths of the test data, XLA:CPU's figures."""

import importlib.metadata
import json
import os
import subprocess
import sys

import pytest

# Every pass in the suite runs under the erasure checker (transforms/erasure.py): a pass that
# touches an op it erased fails its test instead of reading freed memory by luck.
os.environ.setdefault("MLIRXLA_CHECK_ERASURE", "1")
# ... and the invariant checker runs after every changing pass, so a broken pass fails by name
# (a compile outside the suite checks once, after the pipeline: pipelines/runner.py)
os.environ.setdefault("MLIRXLA_VERIFY_EACH", "1")

from mlirxla.tools.conformance import DEFAULT_DIRECTORY as CONFORMANCE  # noqa: E402

REPOSITORY = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# The StableHLO of the JAX programs in examples/jax_programs.py, written by scripts/export-programs.
JAX_PROGRAMS = os.path.join(REPOSITORY, "test", "data", "jax")
# The one suite that comes from outside the repository; its tests skip without it.
CONFORMANCE_ABSENT = f"no StableHLO interpreter suite at {CONFORMANCE} (the StableHLO repository's stablehlo/tests/interpret)"


def backend_unavailable(name: str) -> str | None:
    """Why a registered backend cannot compile and run here (its optional package is missing,
    its programs run on another machine), or None."""
    from mlirxla.backends import registry

    return registry.backend(name).unavailable() or registry.backend(name).runs_elsewhere


# The iree backend's compiler and runtime are the iree extra; its tests skip without them.
IREE_ABSENT = backend_unavailable("iree")


def mpich_file(name: str) -> str | None:
    """A file of the mpich wheel (mpiexec, libmpi.so.12) wherever the wheel put it: this
    venv's bin and lib, or those of the venv whose packages this one reuses."""
    try:
        distribution = importlib.metadata.distribution("mpich")
    except importlib.metadata.PackageNotFoundError:
        return None
    found = [path for path in distribution.files or () if path.name == name]
    return str(distribution.locate_file(found[0]).resolve()) if found else None


def mpi_environment() -> dict:
    """The environment of a process started under mpiexec: mpi4py finds the wheel's MPI
    library even from a venv that reuses another's packages."""
    library = mpich_file("libmpi.so.12")
    extra = {"LD_LIBRARY_PATH": os.path.dirname(library)} if library else {}
    return {**os.environ, **extra}


def backends(names=None) -> list:
    """Registered backends as test parameters, each that cannot compile here skipped with its reason."""
    from mlirxla.backends import registry

    return [pytest.param(name, marks=pytest.mark.skipif(backend_unavailable(name) is not None, reason=backend_unavailable(name) or ""))
            for name in (registry.names() if names is None else names)]


@pytest.fixture
def context():
    from mlirxla.context import new_context

    return new_context()


@pytest.fixture(autouse=True)
def no_kernels_from_earlier_tests():
    """Each test compiles its kernels afresh, as a process of its own would: tests that count
    or break the kernels a compile lowers see every one (`backends/cpu/kernel_cache.py`,
    whose own tests compile more than once in a test)."""
    from mlirxla.backends.cpu import kernel_cache

    kernel_cache.KERNELS.clear()


@pytest.fixture(scope="session")
def xla_figures() -> dict:
    """XLA:CPU's kernels and bytes per benchmark program, read from XLA's own dump by
    benchmarks/xla_figures.py; in a child process, because XLA reads its dump flag once."""
    pytest.importorskip("jax")
    done = subprocess.run([sys.executable, os.path.join(REPOSITORY, "benchmarks", "xla_figures.py")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


# The JAX samples small enough for the reference interpreter, which pass tests run before and after.
PASS_SAMPLES = [
    "01_mlp_softmax.stablehlo.mlir",
    "02_scan_while_cond_gelu.stablehlo.mlir",
    "programs/mlp_softmax_small.stablehlo.mlir",
    "programs/scan.stablehlo.mlir",
]


def random_arguments(module, seed: int = 0) -> list:
    """Arguments for the module's entry function, drawn as `mlirxla-run --seed` draws them."""
    import numpy as np

    from mlirxla.ir_queries import public_entry_name
    from mlirxla.mlir import ir
    from mlirxla.runtime import reference
    from mlirxla.tools.run import generated_argument

    with module.context, ir.Location.unknown():
        types = [ir.RankedTensorType(t) for t in reference.argument_types(module, public_entry_name(module))]
        rng = np.random.default_rng(seed)
        return [generated_argument(t, rng) for t in types]


def reference_outputs(module, arguments) -> list:
    """The entry function's outputs on the reference interpreter, as numpy arrays."""
    from mlirxla.mlir import ir
    from mlirxla.runtime import literals, reference

    with module.context, ir.Location.unknown():
        return [literals.to_numpy(v) for v in reference.execute(module, arguments).outputs]


# the start of a program for `saved_results_of` on eight devices of `platform` (jax's cpu
# backend made to have eight)
EIGHT_DEVICE_PROGRAM = r'''
import sys
import jax, jax.numpy as jnp, numpy as np

platform, path = sys.argv[1], sys.argv[2]
if platform == "cpu":
    jax.config.update("jax_num_cpu_devices", 8)
'''


def saved_results_of(program: str, platform: str, path, environment: dict) -> dict:
    """The arrays `program` saves (`np.savez(sys.argv[2], ...)`, then prints "ok") when run
    in a fresh process with `sys.argv[1]` the platform and `environment` added: jax creates
    its clients once per process, so each platform and device count gets its own."""
    import numpy as np

    done = subprocess.run([sys.executable, "-c", program, platform, str(path)], env=dict(os.environ, **environment),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]
    with np.load(path) as results:
        return dict(results)


def saved_on_mlirxla_and_cpu(program: str, folder) -> tuple[dict, dict]:
    """`saved_results_of` the program on eight mlirxla devices, then on jax's cpu backend."""
    return (saved_results_of(program, "mlirxla", folder / "mlirxla.npz", {"MLIRXLA_NUM_DEVICES": "8", "JAX_PLATFORMS": "mlirxla"}),
            saved_results_of(program, "cpu", folder / "cpu.npz", {"JAX_PLATFORMS": "cpu"}))


def printed_by_jax_on(platform: str, devices: int, script: str, *arguments: str) -> list[str]:
    """The lines `script` prints when jax runs it in a fresh process on `platform` with
    `devices` devices (the plugin's `MLIRXLA_NUM_DEVICES`, or jax's cpu host devices); the
    test fails with the script's stderr when it exits non-zero."""
    environment = dict(os.environ, JAX_PLATFORMS=platform, MLIRXLA_NUM_DEVICES=str(devices),
                       XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
    done = subprocess.run([sys.executable, "-c", script, *arguments], env=environment, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()
