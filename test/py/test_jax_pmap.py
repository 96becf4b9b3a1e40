"""jax.pmap, jax.shard_map and jax.jit over a mesh of several mlirxla devices, against jax's
cpu backend on 8 devices.

Each side runs in a fresh process (jax creates its clients once): `MLIRXLA_NUM_DEVICES=8
JAX_PLATFORMS=mlirxla` for the plugin, `jax_num_cpu_devices=8` for jax's cpu backend. The
same programs (PROGRAMS below, one collective each, over 4 and 8 devices) write their
results to an .npz file; floats compare within rtol 1e-5, integers bit for bit.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

from .conftest import EIGHT_DEVICE_PROGRAM, saved_on_mlirxla_and_cpu

pytest.importorskip("jax")

pytestmark = pytest.mark.jax

PROGRAMS = EIGHT_DEVICE_PROGRAM + r'''
from jax.experimental import io_callback
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
devices = jax.devices(platform)
assert len(devices) == 8, devices
rng = np.random.default_rng(0)
results = {}


def ring(n, step=1):
    return [(j, (j + step) % n) for j in range(n)]


def collectives(n):
    return {
        "psum": lambda a, i: (jax.lax.psum(a, "d"), jax.lax.psum(i, "d")),
        "pmean": lambda a, i: jax.lax.pmean(a, "d"),
        "all_gather": lambda a, i: (jax.lax.all_gather(a, "d"), jax.lax.all_gather(i, "d", axis=1, tiled=True)),
        "ppermute": lambda a, i: (jax.lax.ppermute(a, "d", ring(n)), jax.lax.ppermute(i, "d", ring(n, 3))),
        "all_to_all": lambda a, i: (jax.lax.all_to_all(a, "d", 0, 0), jax.lax.all_to_all(i, "d", 1, 0, tiled=True)),
        "psum_scatter": lambda a, i: (jax.lax.psum_scatter(a, "d"), jax.lax.psum_scatter(i, "d", scatter_dimension=1, tiled=True)),
        "axis_index": lambda a, i: a * jax.lax.axis_index("d") + i.sum(),
        "pmax and pmin": lambda a, i: (jax.lax.pmax(a, "d"), jax.lax.pmin(i, "d")),
        "a training step": lambda a, i: jax.lax.pmean(jax.grad(lambda w: jnp.sum(jnp.tanh(a @ w) ** 2))(a.T), "d"),
    }


for n in (4, 8):
    floats = rng.standard_normal((n, n, 2 * n)).astype(np.float32)
    ints = rng.integers(-1000, 1000, (n, n, 2 * n)).astype(np.int32)
    for name, function in collectives(n).items():
        out = jax.pmap(function, axis_name="d", devices=devices[:n])(floats, ints)
        for k, leaf in enumerate(jax.tree.leaves(out)):
            assert {d.platform for d in leaf.devices()} == {devices[0].platform}
            results[f"pmap {name} over {n}/{k}"] = np.asarray(leaf)
    mesh = Mesh(np.array(devices[:n]), ("d",))
    rows, whole = NamedSharding(mesh, P("d")), NamedSharding(mesh, P())
    x = rng.standard_normal((4 * n, 6)).astype(np.float32)
    mapped = jax.shard_map(lambda a: (jax.lax.psum(a, "d"), a * jax.lax.axis_index("d"),
                                      jax.lax.ppermute(a, "d", ring(n))), mesh=mesh, in_specs=P("d"), out_specs=(P(), P("d"), P("d")))
    out = jax.jit(mapped, in_shardings=rows, out_shardings=(whole, rows, rows))(x)
    for k, leaf in enumerate(out):
        results[f"shard_map over {n}/{k}"] = np.asarray(leaf)

# jit over a 2x4 mesh: the SPMD partitioner's programs (matmul three ways, an MLP with data
# and model parallelism, a sharding constraint inside)
mesh = Mesh(np.array(devices).reshape(2, 4), ("x", "y"))
sharding = lambda *spec: NamedSharding(mesh, P(*spec))
a, b = rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal((32, 16)).astype(np.float32)
w1, w2 = rng.standard_normal((32, 64)).astype(np.float32), rng.standard_normal((64, 8)).astype(np.float32)
meshed = {
    "matmul rows": (lambda a, b: a @ b, (sharding("x", None), sharding()), sharding("x", None)),
    "matmul contracting": (lambda a, b: a @ b, (sharding(None, "y"), sharding("y", None)), sharding()),
    "matmul 2x4": (lambda a, b: a @ b, (sharding("x", "y"), sharding("y", None)), sharding("x", None)),
    "mlp": (lambda a, w1, w2: jax.nn.relu(a @ w1) @ w2, (sharding("x", None), sharding(None, "y"), sharding("y", None)),
            sharding("x", None)),
    "constraint": (lambda a, b: jnp.tanh(jax.lax.with_sharding_constraint(a * 2, sharding(None, "y"))) @ b,
                   (sharding("x", None), sharding()), sharding("x", None)),
}
for name, (function, in_shardings, out_sharding) in meshed.items():
    operands = (a, w1, w2) if name == "mlp" else (a, b)
    out = jax.jit(function, in_shardings=in_shardings, out_shardings=out_sharding)(*operands)
    assert len(out.sharding.device_set) == 8 and {d.platform for d in out.devices()} == {devices[0].platform}
    results[f"jit over a 2x4 mesh: {name}"] = np.asarray(out)

# shardings left to the compiler: arguments committed to the mesh, no out_shardings; jax asks
# the executable which shardings it chose (the key holds them, so both sides must agree)
committed = {"a": jax.device_put(a, sharding("x", "y")), "b": jax.device_put(b, sharding("y", None))}
chosen = {
    "tanh of a matmul": lambda a, b: jnp.tanh(a @ b),
    "two results": lambda a, b: (a @ b, a.sum(0)),
    "elementwise": lambda a, b: a * 2 + 1,
    # jaxlib reads the shardings from a program that holds sdy ops it cannot turn into HLO
    "a sharding constraint": lambda a, b: jax.lax.with_sharding_constraint(a * 2, sharding(None, "y")) + 1,
}
for name, function in chosen.items():
    out = jax.jit(function)(committed["a"], committed["b"])
    for k, leaf in enumerate(jax.tree.leaves(out)):
        results[f"jit, shardings chosen by the compiler: {name}/{k} as {leaf.sharding.spec}"] = np.asarray(leaf)
mesh = Mesh(np.array(devices), ("d",))
mapped = jax.jit(jax.shard_map(lambda a: (a * 2, jax.lax.psum(a, "d")), mesh=mesh, in_specs=P("d"), out_specs=(P("d"), P())))


def ordered_callback(x, y):
    io_callback(lambda v: None, (), x, ordered=True)  # the ordering token enters and leaves the region
    return x + y[:, None]


ordered = jax.jit(jax.shard_map(ordered_callback, mesh=mesh, in_specs=(P(None, "d"), P(None)), out_specs=P(None, "d")))
results["jit of shard_map with an ordered callback"] = np.asarray(ordered(a[:2], a[0, :2]))
for name, argument in (("numpy", a), ("committed", jax.device_put(a, NamedSharding(mesh, P(None, "d"))))):
    for k, leaf in enumerate(mapped(argument)):
        results[f"jit of shard_map, shardings chosen by the compiler, {name}/{k} as {leaf.sharding.spec}"] = np.asarray(leaf)
# pmap under lax.cond (each branch a manual region of its own), the predicate an argument
doubled, summed = jax.pmap(lambda v: v * 2, axis_name="d"), jax.pmap(lambda v: jax.lax.psum(v, "d"), axis_name="d")
switched = jax.jit(lambda p, v: jax.lax.cond(p, doubled, summed, v))
for taken in (True, False):
    results[f"pmap under lax.cond, {taken}"] = np.asarray(switched(taken, a[:8]))
np.savez(path, **results)
print("ok")
'''


def test_pmap_and_shard_map_collectives_match_jax_cpu_on_8_devices(tmp_path):
    got, want = saved_on_mlirxla_and_cpu(PROGRAMS, tmp_path)
    assert sorted(got) == sorted(want) and len(got) > 30
    for name, expected in want.items():
        assert got[name].dtype == expected.dtype and got[name].shape == expected.shape, name
        if np.issubdtype(expected.dtype, np.integer):
            np.testing.assert_array_equal(got[name], expected, err_msg=name)
        else:
            # partitioned programs sum partial products in another order than XLA's partitioner
            rtol, atol = (1e-4, 1e-4) if name.startswith("jit") else (1e-5, 1e-6)
            np.testing.assert_allclose(got[name], expected, rtol=rtol, atol=atol, err_msg=name)


CONV_NET = r'''
import sys
import jax, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

platform, path, examples, dump = sys.argv[1:5]
if platform == "cpu":
    jax.config.update("jax_num_cpu_devices", 8)
sys.path.insert(0, examples)
from spmd_programs import conv_net

mesh = Mesh(np.array(jax.devices(platform)), ("x",))
height, whole = NamedSharding(mesh, P(None, "x", None, None)), NamedSharding(mesh, P())
rng = np.random.default_rng(0)
x = rng.standard_normal((8, 64, 64, 16)).astype(np.float32)
w1, w2 = (rng.standard_normal((3, 3, 16, 16)).astype(np.float32) / 12 for _ in range(2))
jitted = jax.jit(conv_net, in_shardings=(height, whole, whole), out_shardings=height)
options = {"xla_dump_to": dump} if platform == "mlirxla" else {}
out = jitted.lower(x, w1, w2).compile(compiler_options=options)(x, w1, w2)
assert len(out.sharding.device_set) == 8
np.save(path, np.asarray(out))
print("ok")
'''


def test_conv_net_sharded_on_height_matches_jax_cpu_with_halo_exchange(tmp_path):
    """examples/spmd_programs.py's conv net (two 3x3 convolutions and a max pool, NHWC
    8x64x64x16) jitted over 8 devices, sharded on height: the plugin's result equals jax's
    cpu backend's, and its partitioner exchanged halos (three collective-permutes, as XLA's)
    where it once gathered the activation."""
    examples = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
    results = {}
    for platform, environment in (("mlirxla", {"MLIRXLA_NUM_DEVICES": "8", "JAX_PLATFORMS": "mlirxla"}), ("cpu", {"JAX_PLATFORMS": "cpu"})):
        path = tmp_path / f"{platform}.npy"
        done = subprocess.run([sys.executable, "-c", CONV_NET, platform, str(path), examples, str(tmp_path / "dump")],
                              env=dict(os.environ, **environment), capture_output=True, text=True, timeout=900)
        assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]
        results[platform] = np.load(path)
    np.testing.assert_allclose(results["mlirxla"], results["cpu"], rtol=1e-4, atol=1e-5)
    [report] = [p for p in (tmp_path / "dump").rglob("*spmd-partitioner.txt")]
    summary = report.read_text().split("ops (")[0]
    assert "collective-permute: 3," in summary and "all-gather" not in summary, summary
    assert summary.rstrip().endswith("none"), summary


FAILURES = r'''
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, PartitionSpec as P

x = np.arange(16, dtype=np.float32).reshape(4, 4)

def expect_error(run, pattern):
    try:
        run()
    except Exception as error:
        assert pattern in str(error), str(error)
        print("error:", str(error).splitlines()[0])
    else:
        raise AssertionError(f"no error, expected {pattern!r}")

# a replica program the cpu backend refuses: an error at compile, nothing runs
expect_error(lambda: jax.pmap(lambda a: jax.lax.rng_uniform(a[0], a[0] + 1, (4,)), axis_name="d")(x),
             "rng is not implemented in the cpu backend yet")

# one device fails while the others wait for it at a collective: all stop, jax gets the error
def fail_on_device_2(a):
    if a[0] == 8:
        raise ValueError("device 2 fails")
    return a

def failing(a):
    b = jax.pure_callback(fail_on_device_2, jax.ShapeDtypeStruct(a.shape, a.dtype), a)
    return jax.lax.psum(b, "d")

expect_error(lambda: np.asarray(jax.pmap(failing, axis_name="d")(x)), "device 2 fails")

# the process lives on: the same collectives run again
np.testing.assert_array_equal(np.asarray(jax.pmap(lambda a: jax.lax.psum(a, "d"), axis_name="d")(x)),
                              np.tile(x.sum(0), (4, 1)))
print("ok")
'''


def test_failing_replicas_give_jax_errors_and_the_process_lives_on():
    """A pmap the cpu backend refuses fails to compile with our message; a device whose
    callback raises ends the others' wait at the psum, and jax gets that device's error;
    then pmap runs again."""
    environment = dict(os.environ, MLIRXLA_NUM_DEVICES="4", JAX_PLATFORMS="mlirxla")
    done = subprocess.run([sys.executable, "-c", FAILURES], env=environment, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout[-2000:] + done.stderr[-3000:]
    assert done.stdout.count("error:") == 2


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append((value & 0x7F) | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def message(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def build_options(replicas: int, partitions: int, columns: list[list[int]]) -> bytes:
    """CompileOptionsProto{executable_build_options: {num_replicas, num_partitions,
    device_assignment: {replica_count, computation_count, computation_devices}}}."""
    assignment = varint(1 << 3) + varint(replicas) + varint(2 << 3) + varint(partitions) + b"".join(
        message(3, b"".join(varint(1 << 3) + varint(device) for device in column)) for column in columns)
    build = varint(4 << 3) + varint(replicas) + varint(5 << 3) + varint(partitions) + message(9, assignment)
    return message(3, build)


PSUM_OVER_4 = """
module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = "stablehlo.all_reduce"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>,
        replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %1 = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %1 : tensor<f32>
    }) : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}
"""


def test_compile_options_give_the_devices_and_must_agree_with_the_program():
    """The device assignment's partitions (one ComputationDevice each) become the executable's
    devices in flattened-id order; counts that differ from the program's are refused; the
    bridge runs every device's arguments at once."""
    from mlirxla.errors import MlirxlaError
    from mlirxla.runtime.client import Client
    from mlirxla.runtime.pjrt import bridge

    client = Client(device_count=4)
    executable, devices, _, _ = bridge.compile(client, PSUM_OVER_4.encode(), "mlir", build_options(1, 4, [[3], [2], [1], [0]]))
    assert devices == (3, 2, 1, 0)
    assert bridge.executable_info(executable)[4:] == (1, 4)
    arrays = [[np.full(2, d, np.float32)] for d in range(4)]
    outputs = bridge.execute_devices(executable, arrays, [[array.ctypes.data for array in device] for device in arrays], [[]] * 4,
                                     (0, 1, 2, 3), devices)
    assert [output[0].tolist() for output in outputs] == [[6.0, 6.0]] * 4
    with pytest.raises(MlirxlaError, match=r"^the program is for 1 replica\(s\) x 4 partition\(s\) \(mhlo.num_replicas, "
                                           r"mhlo.num_partitions\) but its compile options ask for 4 x 1$"):
        bridge.compile(client, PSUM_OVER_4.encode(), "mlir", build_options(4, 1, [[0, 1, 2, 3]]))
