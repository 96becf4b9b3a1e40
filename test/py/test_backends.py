"""Backends behind one interface: the registry names them, every way of choosing one reaches
it (`Client(backend=)`, `--backend`, `MLIRXLA_BACKEND` for the plugin), each computes the
same answers, and the runtime never imports a backend by path."""

import glob
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from mlirxla.backends import registry
from mlirxla.errors import MlirxlaError
from mlirxla.runtime.client import Client

from .conftest import REPOSITORY, backend_unavailable, backends

PROGRAM = """func.func @main(%x: tensor<4xf32>, %n: tensor<4xi32>) -> (tensor<4xf32>, tensor<i32>) {
  %e = stablehlo.exponential %x : tensor<4xf32>
  %two = stablehlo.constant dense<2> : tensor<4xi32>
  %q = stablehlo.divide %n, %two : tensor<4xi32>
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %s = stablehlo.reduce(%q init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<4xi32>, tensor<i32>) -> tensor<i32>
  return %e, %s : tensor<4xf32>, tensor<i32>
}
"""


def test_registry_names_every_backend_and_refuses_others():
    assert registry.names() == ["cpu", "cuda", "cuda-host", "iree", "reference"]
    for name in registry.names():
        backend = registry.backend(name)
        assert backend.name == name and backend.summary
    with pytest.raises(MlirxlaError, match=r"unknown backend 'rocm' \(known: cpu, cuda, cuda-host, iree, reference\)"):
        registry.backend("rocm")


@pytest.mark.parametrize("name", backends())
def test_each_backend_computes_the_same(name, tmp_path):
    """Through the client (integer division included: the reference backend interprets it in
    a child process), its devices named after it, its plan cached and reloaded."""
    arguments = [np.array([0.0, 1.0, -1.0, 2.0], np.float32), np.array([7, -3, 4, 9], np.int32)]
    client = Client(backend=name, cache_dir=str(tmp_path))
    assert client.devices()[0].device_kind == name
    for _ in range(2):  # compiled, then served from the cache
        e, s = client.compile(PROGRAM).execute_numpy(arguments)
        np.testing.assert_allclose(e, np.exp(arguments[0]), rtol=1e-6)
        assert int(s) == 3 + (-1) + 2 + 4


def test_run_tool_takes_every_registered_backend(tmp_path):
    path = tmp_path / "program.mlir"
    path.write_text(PROGRAM)
    for name in [name for name in registry.names() if backend_unavailable(name) is None]:
        done = subprocess.run([sys.executable, "-m", "mlirxla.tools.run", str(path), "--backend", name, "--dump-to", str(tmp_path / name)],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert any(f.endswith("thunk-sequence.txt") for f in os.listdir(tmp_path / name))


@pytest.mark.jax
def test_plugin_runs_the_backend_its_environment_names():
    pytest.importorskip("jax")
    script = ("import jax, jax.numpy as jnp\n"
              "device = jax.devices('mlirxla')[0]\n"
              "with jax.default_device(device):\n"
              "    print(device.device_kind, float(jax.jit(lambda a: (a * 2).sum())(jnp.arange(4.0))))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=dict(os.environ, MLIRXLA_BACKEND="reference", JAX_PLATFORMS="mlirxla,cpu"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["reference", "12.0"]


def test_the_runtime_never_imports_a_backend_by_path():
    """runtime/ reaches backends only through the registry (and its interface types)."""
    allowed = {"mlirxla.backends", "mlirxla.backends.registry", "mlirxla.backends.backend"}
    for path in glob.glob(os.path.join(REPOSITORY, "runtime", "**", "*.py"), recursive=True):
        with open(path) as stream:
            text = stream.read()
        for module in re.findall(r"(?:from|import) (mlirxla\.backends[\w.]*)", text):
            assert module in allowed, f"{os.path.relpath(path, REPOSITORY)} imports {module}"
