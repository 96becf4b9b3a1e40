"""Unreduced shardings (`last_tile_dims={unreduced}`: the devices along the subgroup hold
partial sums) in the SPMD partitioner and in sharded arrays, without jax: a dot whose
contraction is sharded leaves its partial sums for an unreduced constraint, a later reshard
to a whole sharding inserts the one all-reduce, a whole value made unreduced keeps each
device's source tile; per-device buffers and gathered values against numpy."""

import numpy as np
import pytest

from mlirxla.runtime.client import Array, Client, Sharding
from mlirxla.transforms.spmd_tiling import Tiling
from mlirxla.dialects.xhlo.sharding import HloSharding

MESH = {"x": 2, "y": 4}
ROWS_UNREDUCED_Y = "{devices=[2,1,4]<=[8] last_tile_dims={unreduced}}"
ROWS = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"

# [8,16] x [16,4] on a 2x4 mesh, rows on x and the contraction on y: the dot's result is
# left unreduced over y (result 0), then made whole (result 1)
DOT_THEN_RESHARD = f"""
module attributes {{mhlo.num_partitions = 8 : i32}} {{
  func.func @main(%a: tensor<8x16xf32> {{mhlo.sharding = "{{devices=[2,4]<=[8]}}"}},
                  %b: tensor<16x4xf32> {{mhlo.sharding = "{{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}}"}})
      -> (tensor<8x4xf32> {{mhlo.sharding = "{ROWS_UNREDUCED_Y}"}}, tensor<8x4xf32> {{mhlo.sharding = "{ROWS}"}}) {{
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    %1 = stablehlo.custom_call @Sharding(%0) {{mhlo.sharding = "{ROWS_UNREDUCED_Y}"}} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %2 = stablehlo.custom_call @Sharding(%1) {{mhlo.sharding = "{ROWS}"}} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    return %1, %2 : tensor<8x4xf32>, tensor<8x4xf32>
  }}
}}"""

# an unreduced argument: doubled where it stays unreduced, summed into a whole result
UNREDUCED_ARGUMENT = f"""
module attributes {{mhlo.num_partitions = 8 : i32}} {{
  func.func @main(%u: tensor<8x4xf32> {{mhlo.sharding = "{ROWS_UNREDUCED_Y}"}}) -> (tensor<8x4xf32> {{mhlo.sharding = "{ROWS}"}}) {{
    %0 = stablehlo.add %u, %u : tensor<8x4xf32>
    %1 = stablehlo.custom_call @Sharding(%0) {{mhlo.sharding = "{ROWS_UNREDUCED_Y}"}} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    return %1 : tensor<8x4xf32>
  }}
}}"""

# two unreduced arguments multiplied (a product of partial sums is summed first), and one
# scaled by a whole argument, both left unreduced
PRODUCTS = f"""
module attributes {{mhlo.num_partitions = 8 : i32}} {{
  func.func @main(%u: tensor<8x4xf32> {{mhlo.sharding = "{ROWS_UNREDUCED_Y}"}}, %v: tensor<8x4xf32> {{mhlo.sharding = "{ROWS_UNREDUCED_Y}"}},
                  %w: tensor<8x4xf32> {{mhlo.sharding = "{ROWS}"}})
      -> (tensor<8x4xf32> {{mhlo.sharding = "{ROWS_UNREDUCED_Y}"}}, tensor<8x4xf32> {{mhlo.sharding = "{ROWS_UNREDUCED_Y}"}}) {{
    %0 = stablehlo.multiply %u, %v : tensor<8x4xf32>
    %1 = stablehlo.custom_call @Sharding(%0) {{mhlo.sharding = "{ROWS_UNREDUCED_Y}"}} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %2 = stablehlo.multiply %u, %w : tensor<8x4xf32>
    %3 = stablehlo.custom_call @Sharding(%2) {{mhlo.sharding = "{ROWS_UNREDUCED_Y}"}} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    return %1, %3 : tensor<8x4xf32>, tensor<8x4xf32>
  }}
}}"""

# a value tiled 2x4 made unreduced over both axes, and a replicated one over y
MADE_UNREDUCED = """
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%a: tensor<8x16xf32> {mhlo.sharding = "{devices=[2,4]<=[8]}"}, %r: tensor<8x4xf32> {mhlo.sharding = "{replicated}"})
      -> (tensor<8x16xf32> {mhlo.sharding = "{devices=[1,1,8]<=[8] last_tile_dims={unreduced}}"},
          tensor<8x4xf32> {mhlo.sharding = "{devices=[2,1,4]<=[8] last_tile_dims={unreduced}}"}) {
    %0 = stablehlo.custom_call @Sharding(%a) {mhlo.sharding = "{devices=[1,1,8]<=[8] last_tile_dims={unreduced}}"} : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %1 = stablehlo.custom_call @Sharding(%r) {mhlo.sharding = "{devices=[2,1,4]<=[8] last_tile_dims={unreduced}}"} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    return %0, %1 : tensor<8x16xf32>, tensor<8x4xf32>
  }
}"""


@pytest.fixture(scope="module")
def client():
    return Client(device_count=8)


def operands():
    rng = np.random.default_rng(3)
    return rng.standard_normal((8, 16)).astype(np.float32), rng.standard_normal((16, 4)).astype(np.float32)


def partitioned(text: str):
    from mlirxla import frontdoor
    from mlirxla.context import new_context
    from mlirxla.mlir import ir
    from mlirxla.transforms.sharding_propagation import ShardingPropagationPass
    from mlirxla.transforms.spmd_partitioner import SpmdPartitionerPass

    context = new_context()
    module = frontdoor.import_bytes(text.encode(), "-", context).module
    with context, ir.Location.unknown():
        ShardingPropagationPass().run(module)
        SpmdPartitionerPass().run(module)
    return module


def test_unreduced_subgroup_gives_each_partition_a_label():
    tiling = Tiling.from_hlo(HloSharding.parse(ROWS_UNREDUCED_Y), 2, 8)
    assert tiling.tiles == (2, 1) and tiling.partial == (0, 1, 2, 3, 0, 1, 2, 3)
    assert tiling.summand_groups() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    # tiles move among partitions of one label only
    assert tiling.without([0]).groups_over([0]) is not None
    assert all(len({tiling.label(p) for p in group}) == 1 for group in tiling.groups_over([0]))


def test_unreduced_dot_then_reshard_inserts_one_all_reduce_after_the_dot():
    from mlirxla.ir_queries import nested_ops

    module = partitioned(DOT_THEN_RESHARD)
    ops = [op for op in nested_ops(module.operation) if op.name.startswith("xhlo.")]
    names = [op.name for op in ops]
    assert names.count("xhlo.all_reduce") == 1 and names.count("xhlo.dot") == 1
    assert not any(n in names for n in ("xhlo.all_gather", "xhlo.reduce_scatter", "xhlo.collective_permute", "xhlo.all_to_all"))
    assert names.index("xhlo.dot") < names.index("xhlo.all_reduce")
    [all_reduce] = [op for op in ops if op.name == "xhlo.all_reduce"]
    groups = np.array(all_reduce.attributes["replica_groups"]).tolist()
    assert groups == [[0, 1, 2, 3], [4, 5, 6, 7]]  # over y, within each row tile


def test_unreduced_dot_result_holds_each_devices_partial_sums(client):
    a, b = operands()
    executable = client.compile(DOT_THEN_RESHARD)
    devices = client.devices()
    partial, whole = executable.execute([Array.from_numpy(a, Sharding.named(MESH, ("x", "y"), devices)),
                                         Array.from_numpy(b, Sharding.from_hlo("{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}", devices))])
    for device, shard in enumerate(partial.addressable_shards):
        rows, columns = slice(4 * (device // 4), 4 * (device // 4) + 4), slice(4 * (device % 4), 4 * (device % 4) + 4)
        np.testing.assert_allclose(shard.buffer.to_numpy(), a[rows, columns] @ b[columns], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(partial.to_numpy(), a @ b, rtol=1e-5, atol=1e-5)  # the partial sums added up
    np.testing.assert_allclose(whole.to_numpy(), a @ b, rtol=1e-5, atol=1e-5)
    assert not whole.sharding.is_unreduced() and partial.sharding.is_unreduced()


def test_unreduced_argument_stays_partial_until_summed(client):
    a, b = operands()
    product = a @ b
    devices = client.devices()
    argument = Array.from_numpy(product, Sharding.from_hlo(ROWS_UNREDUCED_Y, devices))
    # made from a whole value: label 0 of each row tile holds it, the others zeros
    assert [np.count_nonzero(s.buffer.to_numpy()) > 0 for s in argument.addressable_shards] == [True, False, False, False] * 2
    [out] = client.compile(UNREDUCED_ARGUMENT).execute([argument])
    np.testing.assert_allclose(out.to_numpy(), 2 * product, rtol=1e-6)


def test_whole_values_made_unreduced_keep_their_source_tiles(client):
    a, _ = operands()
    r = np.arange(32, dtype=np.float32).reshape(8, 4)
    devices = client.devices()
    tiled, replicated = client.compile(MADE_UNREDUCED).execute([Array.from_numpy(a, Sharding.named(MESH, ("x", "y"), devices)),
                                                                Array.from_numpy(r, Sharding.replicated(devices))])
    for device, shard in enumerate(tiled.addressable_shards):
        expected = np.zeros_like(a)
        rows, columns = slice(4 * (device // 4), 4 * (device // 4) + 4), slice(4 * (device % 4), 4 * (device % 4) + 4)
        expected[rows, columns] = a[rows, columns]
        np.testing.assert_array_equal(shard.buffer.to_numpy(), expected)
    for device, shard in enumerate(replicated.addressable_shards):
        rows = slice(4 * (device // 4), 4 * (device // 4) + 4)
        np.testing.assert_array_equal(shard.buffer.to_numpy(), r[rows] if device % 4 == 0 else np.zeros((4, 4), np.float32))
    np.testing.assert_array_equal(tiled.to_numpy(), a)
    np.testing.assert_array_equal(replicated.to_numpy(), r)


def test_products_of_unreduced_values(client):
    rng = np.random.default_rng(4)
    u, v, w = (rng.standard_normal((8, 4)).astype(np.float32) for _ in range(3))
    devices = client.devices()
    unreduced = Sharding.from_hlo(ROWS_UNREDUCED_Y, devices)

    def spread(value):
        """`value` as partial sums that differ on every device."""
        parts = [rng.standard_normal((4, 4)).astype(np.float32) for _ in range(8)]
        for row_tile in (0, 1):
            rows = slice(4 * row_tile, 4 * row_tile + 4)
            parts[4 * row_tile] += value[rows] - sum(parts[4 * row_tile:4 * row_tile + 4])
        return Array(value.shape, value.dtype, unreduced, [client.buffer_from_pyval(p, d) for p, d in zip(parts, devices)])

    arguments = [spread(u), spread(v), Array.from_numpy(w, Sharding.from_hlo(ROWS, devices))]
    np.testing.assert_allclose(arguments[0].to_numpy(), u, rtol=1e-5, atol=1e-5)
    both, scaled = client.compile(PRODUCTS).execute(arguments)
    np.testing.assert_allclose(both.to_numpy(), u * v, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(scaled.to_numpy(), u * w, rtol=1e-4, atol=1e-4)
    # scaled in place: each device's partial sum times the whole value, no collective
    for shard, part in zip(scaled.addressable_shards, arguments[0].addressable_shards):
        np.testing.assert_allclose(shard.buffer.to_numpy(), part.buffer.to_numpy() * w[shard.index], rtol=1e-5, atol=1e-5)


ROWS_8x8_UNREDUCED_Y = "{devices=[2,1,4]<=[8] last_tile_dims={unreduced}}"
# a dot's partial sums written into an unreduced accumulator (a layer's gradient into the
# scan's stacked gradients), summed once at the end
WRITTEN_INTO_AN_ACCUMULATOR = f"""
module attributes {{mhlo.num_partitions = 8 : i32}} {{
  func.func @main(%a: tensor<8x16xf32> {{mhlo.sharding = "{{devices=[2,4]<=[8]}}"}},
                  %b: tensor<16x4xf32> {{mhlo.sharding = "{{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}}"}},
                  %acc: tensor<8x8xf32> {{mhlo.sharding = "{{replicated}}"}}) -> (tensor<8x8xf32> {{mhlo.sharding = "{ROWS}"}}) {{
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    %1 = stablehlo.custom_call @Sharding(%0) {{mhlo.sharding = "{ROWS_UNREDUCED_Y}"}} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %2 = stablehlo.custom_call @Sharding(%acc) {{mhlo.sharding = "{ROWS_8x8_UNREDUCED_Y}"}} : (tensor<8x8xf32>) -> tensor<8x8xf32>
    %zero = stablehlo.constant dense<0> : tensor<i32>
    %four = stablehlo.constant dense<4> : tensor<i32>
    %3 = stablehlo.dynamic_update_slice %2, %1, %zero, %four : (tensor<8x8xf32>, tensor<8x4xf32>, tensor<i32>, tensor<i32>) -> tensor<8x8xf32>
    %4 = stablehlo.custom_call @Sharding(%3) {{mhlo.sharding = "{ROWS_8x8_UNREDUCED_Y}"}} : (tensor<8x8xf32>) -> tensor<8x8xf32>
    %5 = stablehlo.custom_call @Sharding(%4) {{mhlo.sharding = "{ROWS}"}} : (tensor<8x8xf32>) -> tensor<8x8xf32>
    return %5 : tensor<8x8xf32>
  }}
}}"""


def test_partial_sums_written_into_an_unreduced_accumulator_are_summed_once(client):
    """A dynamic-update-slice is linear in its operand and update together: partial sums
    written into partial sums stay partial, and only the final reshard all-reduces (the
    microbatch loop of jax's `test_scan_over_layers_minibatch_unreduced` all-reduced every
    layer's gradient before writing it)."""
    from mlirxla.ir_queries import nested_ops

    module = partitioned(WRITTEN_INTO_AN_ACCUMULATOR)  # held: the module owns the ops walked
    names = [op.name for op in nested_ops(module.operation)]
    assert names.count("xhlo.all_reduce") == 1
    a, b = operands()
    accumulator = np.random.default_rng(4).standard_normal((8, 8)).astype(np.float32)
    [result] = client.compile(WRITTEN_INTO_AN_ACCUMULATOR).execute_numpy([a, b, accumulator])
    expected = accumulator.copy()
    expected[:, 4:] = a @ b
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)
