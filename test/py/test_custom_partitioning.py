"""jax's `custom_partitioning` on several devices (`transforms/custom_partitioning.py`): the
user's partition callback gets the shardings jax's cpu backend gives it, and its device
program, collectives included, computes what jax's cpu backend computes, inside a scan
too and with branches of its own; a call whose
callbacks are not alive here, or whose callback raises, is refused in one line."""

import os
import subprocess
import sys

import pytest

from mlirxla.errors import MlirxlaError
from mlirxla.runtime.client import Client

from .conftest import printed_by_jax_on

PARTITIONED_CALL = """module attributes {mhlo.num_partitions = 2 : i32} {
func.func @main(%x: tensor<8x4xf32> {mhlo.sharding = "{devices=[2,1]<=[2]}"}) -> tensor<8xf32> {
  %y = stablehlo.custom_call @CustomSPMDPartitioning(%x) {backend_config = "1", sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([i]) {i=8, j=4}, custom>} : (tensor<8x4xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
}"""


def test_a_call_whose_callbacks_are_not_alive_here_is_refused():
    pytest.importorskip("jax")
    with pytest.raises(MlirxlaError, match=r"^<text>:3:8: custom_call @CustomSPMDPartitioning: its callbacks are not alive "
                                           r"in this process \(the program was lowered by jax in another process"):
        Client(device_count=2).compile(PARTITIONED_CALL)


ROW_SUMS = """
import sys
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P
from jax.experimental.custom_partitioning import custom_partitioning
mesh = jax.make_mesh((4, 2), ("x", "y"))
seen = []

@custom_partitioning
def row_sums(x):
    return jnp.sum(x, axis=1)

def partition(mesh, arg_shapes, result_shape):
    seen.append((str(arg_shapes[0].sharding.spec), str(result_shape.sharding.spec)))
    if sys.argv[1] == "raise":
        raise ValueError("no partitioning for this layout")
    def per_device(block):
        return jax.lax.psum(jnp.sum(block, axis=1), "y")
    return mesh, per_device, NamedSharding(mesh, P("x")), (NamedSharding(mesh, P("x", "y")),)

row_sums.def_partition(partition=partition, sharding_rule="i j -> i",
                       infer_sharding_from_operands=lambda mesh, arg_shapes, result_shape: NamedSharding(mesh, P("x")))
x = jax.device_put(jnp.arange(32.0).reshape(8, 4), NamedSharding(mesh, P("x", "y")))
out = jax.jit(lambda x: row_sums(x) * 2)(x)
print(seen, np.asarray(out).tolist(), out.sharding.spec)
"""


def run_row_sums(platform: str, mode: str) -> subprocess.CompletedProcess:
    environment = dict(os.environ, JAX_PLATFORMS=platform, MLIRXLA_NUM_DEVICES="8",
                       XLA_FLAGS="--xla_force_host_platform_device_count=8")
    return subprocess.run([sys.executable, "-c", ROW_SUMS, mode], env=environment, capture_output=True, text=True, timeout=300)


@pytest.mark.jax
def test_the_partition_callback_sees_and_computes_what_it_does_on_cpu():
    """Propagation gives the call's result the rows of its operand (the declared rule `i j -> i`),
    the callback asks for the operand whole along "y", and its psum over "y" runs on the
    plugin's 8 devices."""
    pytest.importorskip("jax")
    outputs = [run_row_sums(platform, "compute") for platform in ("cpu", "mlirxla")]
    for done in outputs:
        assert done.returncode == 0, done.stderr[-2000:]
    expected = "[(\"P('x', 'y')\", \"P('x',)\")] [12.0, 44.0, 76.0, 108.0, 140.0, 172.0, 204.0, 236.0] P('x',)"
    assert [done.stdout.strip().splitlines()[-1] for done in outputs] == [expected, expected]


@pytest.mark.jax
def test_a_callback_that_raises_ends_the_compile_in_one_line():
    pytest.importorskip("jax")
    done = run_row_sums("mlirxla", "raise")
    assert done.returncode != 0
    assert ("custom_call @CustomSPMDPartitioning: the partition callback raised ValueError: no partitioning for this "
            "layout") in done.stderr


SCANNED = """
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P
from jax.experimental.custom_partitioning import custom_partitioning
mesh = jax.make_mesh((4, 2), ("x", "y"))

@custom_partitioning
def doubled(x):
    return x * 2

def partition(mesh, arg_shapes, result_shape):
    sharding = arg_shapes[0].sharding
    return mesh, lambda block: block * 2, sharding, (sharding,)

doubled.def_partition(partition=partition, sharding_rule="i j -> i j",
                      infer_sharding_from_operands=lambda mesh, arg_shapes, result_shape: arg_shapes[0].sharding)
x = jax.device_put(jnp.arange(32.0).reshape(8, 4), NamedSharding(mesh, P("x", "y")))
out = jax.jit(lambda x: jax.lax.scan(lambda carry, _: (doubled(carry) + 1, None), x, None, length=3)[0])(x)
print(np.asarray(out).tolist(), out.sharding.spec)
"""


@pytest.mark.jax
def test_a_call_in_a_scan_is_partitioned_with_the_loops_sharding():
    pytest.importorskip("jax")
    environment = dict(os.environ, JAX_PLATFORMS="mlirxla", MLIRXLA_NUM_DEVICES="8")
    done = subprocess.run([sys.executable, "-c", SCANNED], env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    expected = [[float(value * 8 + 7) for value in range(row * 4, row * 4 + 4)] for row in range(8)]
    assert done.stdout.strip().splitlines()[-1] == f"{expected} P('x', 'y')"


WITH_BRANCHES = """
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P
from jax.experimental.custom_partitioning import custom_partitioning
mesh = jax.make_mesh((4, 2), ("x", "y"))

@custom_partitioning
def branchy(x):
    return x

def partition(mesh, arg_shapes, result_shape):
    def per_device(block):
        return jax.lax.cond(block.sum() > 0, lambda b: b * 2, lambda b: b - 1, block)
    sharding = arg_shapes[0].sharding
    return mesh, per_device, sharding, (sharding,)

branchy.def_partition(partition=partition, sharding_rule="i j -> i j")
x = jax.device_put(jnp.arange(32.0).reshape(8, 4) - 10, NamedSharding(mesh, P("x", "y")))
out = jax.jit(lambda x: branchy(x) + jax.lax.cond(x.sum() > 0, lambda b: b * 3, lambda b: b, x))(x)
print(np.asarray(out).tolist())
"""


@pytest.mark.jax
def test_a_device_program_with_branches_beside_the_programs_own():
    """The device program's `lax.cond` branch functions join the program, which has branch
    functions of the same names: each device's block takes its own branch, as on cpu."""
    pytest.importorskip("jax")
    assert printed_by_jax_on("cpu", 8, WITH_BRANCHES)[-1] == printed_by_jax_on("mlirxla", 8, WITH_BRANCHES)[-1]
