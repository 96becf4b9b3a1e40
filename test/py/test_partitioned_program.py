"""What jax's `compiled.as_text()` shows of a jit over several devices
(`runtime/pjrt/partitioned_program.py`): the program each device runs, with the collectives
the partitioner inserted and per-device shapes, as XLA's optimized HLO; the chosen shardings
and the cost analysis still read from it."""

import os
import subprocess
import sys

import pytest

from .conftest import printed_by_jax_on

pytestmark = pytest.mark.jax

PROGRAM = """
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((2, 2), ("x", "y"))
x = jax.device_put(jnp.arange(16.0).reshape(8, 2), NamedSharding(mesh, P("x", "y")))
compiled = jax.jit(lambda a: jnp.sum(a, axis=0)).lower(x).compile()
text = compiled.as_text()
print("all-reduce(" in text, "f32[4,1]" in text, compiled.output_shardings.spec, compiled(x).tolist(),
      compiled.cost_analysis()["flops"] > 0)
"""

# a LAPACK custom call sharded on its batch dimension
LAPACK = """
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((4,), ("x",))
a = jax.device_put(jnp.eye(4) * jnp.arange(1.0, 5.0)[:, None, None], NamedSharding(mesh, P("x")))
compiled = jax.jit(jnp.linalg.eigvalsh).lower(a).compile()
print("all-" in compiled.as_text(), compiled(a).tolist()[3], tuple(compiled(a).sharding.spec))
"""


def test_a_compile_the_cache_serves_shows_the_partitioned_program_too(tmp_path):
    """The second process's compile is a compile-cache hit (`MLIRXLA_CACHE_DIR`): it compiles
    nothing, and its `as_text()` is the partitioned program the first one kept beside the entry."""
    pytest.importorskip("jax")
    environment = dict(os.environ, JAX_PLATFORMS="mlirxla", MLIRXLA_NUM_DEVICES="4", MLIRXLA_CACHE_DIR=str(tmp_path))
    lines = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", PROGRAM], env=environment, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        lines.append(done.stdout.strip().splitlines()[-1])
    assert lines == ["True True P('y',) [56.0, 64.0] True"] * 2
    assert any(os.path.isfile(os.path.join(tmp_path, entry, "partitioned.mlir")) for entry in os.listdir(tmp_path))


@pytest.mark.parametrize("platform", ["cpu", "mlirxla"])
def test_as_text_shows_each_devices_program_with_its_collectives(platform):
    pytest.importorskip("jax")
    assert printed_by_jax_on(platform, 4, PROGRAM)[-1] == "True True P('y',) [56.0, 64.0] True"


def test_a_lapack_call_sharded_on_its_batch_runs_without_a_gather():
    """The call runs on each device's matrices (`_Partitioner.custom_call`), as on XLA: no
    collective in the text, which jaxlib could read (a custom call's operand and result
    layouts kept in pairs), and the right eigenvalues."""
    pytest.importorskip("jax")
    environment = dict(os.environ, JAX_PLATFORMS="mlirxla", MLIRXLA_NUM_DEVICES="4")
    done = subprocess.run([sys.executable, "-c", LAPACK], env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "False [4.0, 4.0, 4.0, 4.0] ('x', None)"
