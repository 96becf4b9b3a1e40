"""Sharded arrays in the Python API (`runtime/sharded.py`): shardings from a mesh and a spec,
arrays split into per-device buffers and gathered back, partitioned StableHLO programs run on
8 devices on such arrays and compared with numpy, without jax; bad input refused in one line."""

import os
import re

import numpy as np
import pytest

from mlirxla.errors import MlirxlaError
from mlirxla.runtime.client import Array, Buffer, Client, Sharding

from .conftest import JAX_PROGRAMS

MESH = {"x": 2, "y": 4}


@pytest.fixture(scope="module")
def client():
    return Client(device_count=8)


def refused(pattern: str, call, *arguments):
    with pytest.raises(MlirxlaError) as caught:
        call(*arguments)
    message = str(caught.value)
    assert "\n" not in message and re.search(pattern, message), message


# ---------------------------------------------------------------- shardings and arrays


def test_named_shardings_are_xlas_tile_assignments(client):
    devices = client.devices()
    assert str(Sharding.named(MESH, ("x", "y"), devices).hlo) == "{devices=[2,4]<=[8]}"
    assert str(Sharding.named(MESH, ("x", None), devices).hlo) == "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"
    assert str(Sharding.named(MESH, (None, "y"), devices).hlo) == "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"
    assert str(Sharding.named(MESH, (("y", "x"), None), devices).hlo) == "{devices=[8,1]<=[2,4]T(1,0)}"
    assert Sharding.named(MESH, (None, None), devices).is_fully_replicated()
    sharding = Sharding.named(MESH, ("x", None), devices)
    assert sharding.shard_shape((16, 8)) == (8, 8)
    assert sharding.indices((16, 8))[5] == (slice(8, 16), slice(0, 8))
    assert sharding.is_equivalent_to(Sharding.from_hlo("{devices=[2,1,4]<=[8] last_tile_dim_replicate}", devices), (16, 8))
    assert not sharding.is_equivalent_to(Sharding.named(MESH, ("x", None), devices[::-1]), (16, 8))


@pytest.mark.parametrize("spec, text", [
    (("x", "y"), None),                                          # tiled over both axes
    (None, "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"),    # partially replicated
    ((None, "y"), None),                                         # partially replicated, transposed iota
    (None, "{devices=[4,2]7,6,5,4,3,2,1,0}"),                    # an explicit device list
    (None, "{replicated}"),
])
def test_from_numpy_and_to_numpy_round_trip(client, spec, text):
    x = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
    sharding = Sharding.named(MESH, spec, client.devices()) if spec else Sharding.from_hlo(text, client.devices())
    array = Array.from_numpy(x, sharding)
    assert (array.shape, array.dtype, array.sharding) == ((16, 8), np.float32, sharding)
    shards = array.addressable_shards
    assert [shard.device.id for shard in shards] == list(range(8))
    for shard in shards:
        assert shard.buffer.device == shard.device and shard.buffer.shape == sharding.shard_shape(x.shape)
        np.testing.assert_array_equal(shard.buffer.to_numpy(), x[shard.index])
    np.testing.assert_array_equal(array.to_numpy(), x)


def test_replicated_scalars_and_placement_by_device(client):
    scalar = Array.from_numpy(np.float32(2.5), Sharding.replicated(client.devices()[:3]))
    assert scalar.shape == () and scalar.to_numpy() == np.float32(2.5)
    assert [s.device.id for s in scalar.addressable_shards] == [0, 1, 2]
    # tile 0 of a 4-way split lives on device 7 when the device list starts there
    array = Array.from_numpy(np.arange(8), Sharding.named({"x": 4}, ("x",), client.devices()[4:][::-1]))
    assert array.addressable_shards[0].device.id == 7
    np.testing.assert_array_equal(array.addressable_shards[0].buffer.to_numpy(), [0, 1])


# ---------------------------------------------------------------- partitioned programs

MATMUL_2X4 = """
module @matmul attributes {mhlo.num_partitions = 8 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  func.func @main(%a: tensor<64x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>},
                  %b: tensor<128x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>})
      -> (tensor<64x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) {
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<64x128xf32>, tensor<128x32xf32>) -> tensor<64x32xf32>
    return %0 : tensor<64x32xf32>
  }
}"""

# a 2x4 mesh in GSPMD's syntax: rows of %a on "x", columns on "y"; %b's rows on "x"
ELEMENTWISE_REDUCE = """
module @elementwise_reduce attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%a: tensor<16x32xf32> {mhlo.sharding = "{devices=[2,4]<=[8]}"},
                  %b: tensor<16x32xf32> {mhlo.sharding = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"})
      -> (tensor<16xf32>, tensor<16x32xf32> {mhlo.sharding = "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"}) {
    %t = stablehlo.tanh %a : tensor<16x32xf32>
    %m = stablehlo.multiply %t, %b : tensor<16x32xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.reduce(%m init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<16x32xf32>, tensor<f32>) -> tensor<16xf32>
    return %s, %m : tensor<16xf32>, tensor<16x32xf32>
  }
}"""


def test_matmul_with_both_operands_sharded_on_a_2x4_mesh(client):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((64, 128)).astype(np.float32), rng.standard_normal((128, 32)).astype(np.float32)
    executable = client.compile(MATMUL_2X4)
    assert [d.id for d in executable.devices] == list(range(8))
    devices = client.devices()
    arguments = [Array.from_numpy(a, Sharding.named(MESH, ("x", "y"), devices)),
                 Array.from_numpy(b, Sharding.named(MESH, ("y", None), devices))]
    [out] = executable.execute(arguments)
    assert out.sharding.is_equivalent_to(Sharding.named(MESH, ("x", "y"), devices), (64, 32))
    assert (out.shape, out.dtype) == ((64, 32), np.float32)
    np.testing.assert_allclose(out.to_numpy(), a @ b, rtol=1e-5, atol=1e-5)
    for shard in out.addressable_shards:  # each device holds its own tile
        assert shard.buffer.shape == (32, 8)
        np.testing.assert_allclose(shard.buffer.to_numpy(), (a @ b)[shard.index], rtol=1e-5, atol=1e-5)


def test_elementwise_and_reduce_with_gspmd_shardings(client):
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal((16, 32)).astype(np.float32)
    executable = client.compile(ELEMENTWISE_REDUCE)
    arguments = [Array.from_numpy(a, executable.parameter_shardings[0]), Array.from_numpy(b, executable.parameter_shardings[1])]
    summed, product = executable.execute(arguments)
    expected = np.tanh(a) * b
    np.testing.assert_allclose(product.to_numpy(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(summed.to_numpy(), expected.sum(axis=1), rtol=1e-5, atol=1e-5)
    assert str(product.sharding.hlo) == "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"
    assert summed.sharding == executable.output_shardings[0]
    # the same run on global numpy arrays
    np.testing.assert_allclose(executable.execute_numpy([a, b])[0], expected.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_uneven_shards_are_padded_tiles(client):
    x = np.arange(1, 13, dtype=np.float32).reshape(12, 1) * np.ones((1, 3), np.float32)
    sharding = Sharding.named({"x": 8}, ("x", None), client.devices())
    array = Array.from_numpy(x, sharding)
    assert sharding.shard_shape(x.shape) == (2, 3)
    # rows 0..11 in tiles of 2: devices 6 and 7 hold padding only
    assert [index[0] for index in sharding.indices(x.shape)][5:] == [slice(10, 12), slice(12, 12), slice(12, 12)]
    for shard in array.addressable_shards:
        assert shard.buffer.shape == (2, 3)
    np.testing.assert_array_equal(array.addressable_shards[7].buffer.to_numpy(), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(array.to_numpy(), x)


UNEVEN_ROWS = """
module attributes {mhlo.num_partitions = 4 : i32} {
  func.func @main(%a: tensor<10x3xf32> {mhlo.sharding = "{devices=[4,1]<=[4]}"}) -> (tensor<10x3xf32> {mhlo.sharding = "{devices=[4,1]<=[4]}"}, tensor<3xf32> {mhlo.sharding = "{replicated}"}) {
    %e = stablehlo.exponential %a {mhlo.sharding = "{devices=[4,1]<=[4]}"} : tensor<10x3xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<10x3xf32>, tensor<f32>) -> tensor<3xf32>
    return %e, %s : tensor<10x3xf32>, tensor<3xf32>
  }
}"""


def test_a_program_sharded_unevenly_takes_and_returns_padded_tiles(client):
    a = np.random.default_rng(3).standard_normal((10, 3)).astype(np.float32)
    executable = client.compile(UNEVEN_ROWS)
    assert executable.parameter_shardings[0].shard_shape(a.shape) == (3, 3)
    exponential, total = executable.execute([Array.from_numpy(a, executable.parameter_shardings[0])])
    assert [shard.buffer.shape for shard in exponential.addressable_shards] == [(3, 3)] * 4
    np.testing.assert_allclose(exponential.to_numpy(), np.exp(a), rtol=1e-6)
    # the padding (exp(0) = 1 in the last tile's two padded rows) is not summed
    np.testing.assert_allclose(total.to_numpy(), np.exp(a).sum(axis=0), rtol=1e-5)


def test_mlirxla_run_splits_and_assembles_an_uneven_entry(tmp_path, capsys):
    from mlirxla.tools import run as run_tool

    a = np.random.default_rng(4).standard_normal((10, 3)).astype(np.float32)
    (tmp_path / "rows.mlir").write_text(UNEVEN_ROWS)
    np.savez(tmp_path / "in.npz", arg0=a)
    outputs = tmp_path / "out.npz"
    assert run_tool.main([str(tmp_path / "rows.mlir"), "--inputs", str(tmp_path / "in.npz"), "-o", str(outputs)]) == 0
    assert "partitioned by its shardings (global results)" in capsys.readouterr().out
    saved = np.load(outputs)
    assert saved["result0"].shape == (10, 3)
    np.testing.assert_allclose(saved["result1"], np.exp(a).sum(axis=0), rtol=1e-5)


def test_a_shard_map_program_takes_arrays_by_its_declared_shardings(client):
    executable = client.compile(os.path.join(JAX_PROGRAMS, "05_shard_map_psum.stablehlo.mlir"))
    assert len(executable.devices) == 4
    x = np.random.default_rng(3).standard_normal((16, 64)).astype(np.float32)
    [total] = executable.execute([Array.from_numpy(x, Sharding.named({"data": 2, "model": 2}, ("data", None), client.devices()[:4]))])
    assert total.sharding.is_fully_replicated()
    np.testing.assert_allclose(total.to_numpy(), x.sum(), rtol=1e-5)


def test_replicas_hold_the_same_shards():
    program = """
    module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 2 : i32} {
      func.func @main(%a: tensor<8x4xf32> {mhlo.sharding = "{devices=[4,1]<=[4]}"}) -> (tensor<8x4xf32> {mhlo.sharding = "{devices=[1,4]<=[4]}"}) {
        %0 = stablehlo.negate %a : tensor<8x4xf32>
        return %0 : tensor<8x4xf32>
      }
    }"""
    executable = Client(device_count=8).compile(program)
    # device r * 4 + p holds partition p's tile
    assert str(executable.parameter_shardings[0].hlo) == "{devices=[4,1,2]0,4,1,5,2,6,3,7 last_tile_dim_replicate}"
    a = np.arange(32, dtype=np.float32).reshape(8, 4)
    [out] = executable.execute([Array.from_numpy(a, executable.parameter_shardings[0])])
    shards = out.addressable_shards
    assert [s.index for s in shards[:4]] == [s.index for s in shards[4:]]
    np.testing.assert_array_equal(out.to_numpy(), -a)


def test_reshard_and_donation(client):
    executable = client.compile(ELEMENTWISE_REDUCE)
    a = np.ones((16, 32), np.float32)
    rows = Sharding.named(MESH, ("x", None), client.devices())
    first = Array.from_numpy(a, rows).reshard(executable.parameter_shardings[0])
    second = Array.from_numpy(a, rows)
    summed, _ = executable.execute([first, second], donate=(0,))
    np.testing.assert_allclose(summed.to_numpy(), np.full(16, 32 * np.tanh(1.0), np.float32), rtol=1e-5)
    assert first.is_deleted() and not second.is_deleted()
    refused(r"^the array was deleted", first.to_numpy)


def test_sharded_executables_come_from_the_compile_cache_with_their_shardings(tmp_path):
    for _ in range(2):
        client = Client(device_count=8, cache_dir=str(tmp_path))
        executable = client.compile(MATMUL_2X4)
        assert str(executable.output_shardings[0].hlo) == "{devices=[2,4]<=[8]}"
    assert client.cache.hits == 1
    a, b = np.ones((64, 128), np.float32), np.ones((128, 32), np.float32)
    np.testing.assert_array_equal(executable.execute_numpy([a, b])[0], a @ b)


def test_single_device_programs_keep_buffers(client):
    executable = client.compile("func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {\n"
                                "  %0 = stablehlo.negate %a : tensor<3xf32>\n  return %0 : tensor<3xf32>\n}")
    [out] = executable.execute([client.buffer_from_pyval(np.arange(3, dtype=np.float32))])
    assert isinstance(out, Buffer) and out.to_numpy().tolist() == [-0.0, -1.0, -2.0]
    refused(r"^argument 0 is an Array: a program for one device takes Buffers or numpy arrays$", executable.execute,
            [Array.from_numpy(np.zeros(3, np.float32), Sharding.replicated(client.devices()[:1]))])


# ---------------------------------------------------------------- refusals


def test_wrong_shardings_shapes_and_kinds_are_refused_in_one_line(client):
    executable = client.compile(MATMUL_2X4)
    devices = client.devices()
    a, b = np.zeros((64, 128), np.float32), np.zeros((128, 32), np.float32)
    right = Array.from_numpy(b, executable.parameter_shardings[1])
    refused(r"^argument 0 is sharded \{devices=\[2,1,4\]<=\[8\] last_tile_dim_replicate\} over devices 0-7, but the executable "
            r"takes \{devices=\[2,4\]<=\[8\]\} over devices 0-7 \(array.reshard\(executable.parameter_shardings\[0\]\)\)$",
            executable.execute, [Array.from_numpy(a, Sharding.named(MESH, ("x", None), devices)), right])
    refused(r"^argument 0: expected float32\[64, 128\], got float32\[128, 32\]$", executable.execute, [right, right])
    refused(r"^argument 0: expected float32\[64, 128\], got float64\[64, 128\]$", executable.execute,
            [Array.from_numpy(a.astype(np.float64), executable.parameter_shardings[0]), right])
    refused(r"^argument 0 is a ndarray: a program for 8 devices takes Arrays", executable.execute, [a, right])
    refused(r"^the executable takes 2 argument\(s\), got 1$", executable.execute_numpy, [a])
    refused(r"^the program is for 1 replica\(s\) x 8 partition\(s\), 8 devices; this client has 1 \(Client\(device_count=8\)\)$",
            Client().compile, MATMUL_2X4)


def test_bad_shardings_are_refused_in_one_line(client):
    devices = client.devices()
    refused(r"^the sharding \{devices=\[2,4\]<=\[8\]\} splits 2 dimension\(s\), but the array has shape \[16\]$",
            Array.from_numpy, np.zeros(16), Sharding.named(MESH, ("x", "y"), devices))
    refused(r"^the spec \('z',\) names axis 'z', which the mesh", Sharding.named, MESH, ("z",), devices)
    refused(r"^the spec \('x', 'x'\) uses axis 'x' twice$", Sharding.named, MESH, ("x", "x"), devices)
    refused(r"^the mesh \{'x': 2, 'y': 4\} has 8 devices, but 4 are given$", Sharding.named, MESH, ("x",), devices[:4])
    refused(r"^invalid HloSharding '\{devices=\[2\]'", Sharding.from_hlo, "{devices=[2]", devices)
    refused(r"^\{maximal device=1\} puts an array on one device", Sharding.from_hlo, "{maximal device=1}", devices)
    refused(r"^the sharding \{devices=\[2,2\]<=\[4\]\} places tiles on 4 devices, but 8 are given$",
            Sharding.from_hlo, "{devices=[2,2]<=[4]}", devices)
    refused(r"^a sharding's devices must be distinct: device 0 appears twice$", Sharding.replicated, [devices[0], devices[0]])
