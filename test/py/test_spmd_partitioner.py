"""xhlo-spmd-partitioner: tilings and their collective groups, the resharding plans, sharded
programs run on 8 CPU devices against numpy and against jax's own sharded run."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from mlirxla.dialects.xhlo.sharding import HloSharding
from mlirxla.transforms.resharding import plan
from mlirxla.transforms.spmd_tiling import Tiling

from .conftest import REPOSITORY


def tiling(text: str, rank: int = 2) -> Tiling:
    return Tiling.from_hlo(HloSharding.parse(text), rank, 8)


def test_tiles_and_groups_of_a_partially_replicated_sharding():
    rows = tiling("{devices=[2,1,4]<=[8] last_tile_dim_replicate}")
    assert rows.tiles == (2, 1) and rows.valid()
    assert [rows.index[p] for p in (0, 3, 4, 7)] == [(0, 0), (0, 0), (1, 0), (1, 0)]
    # gathering dim 0 pairs each partition with the one holding the other row tile
    assert rows.groups_over([0]) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    columns = tiling("{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}")
    # the "y" axis of a 2x4 mesh: tiles 0..3 on partitions 0..3 (and again on 4..7)
    assert columns.groups_over([1]) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    # a tiling next to itself names each tile twice: not a tiling of 8 partitions
    assert not rows.concat(rows).valid()


def test_resharding_plans():
    rows, columns = tiling("{devices=[8,1]<=[8]}"), tiling("{devices=[1,8]<=[8]}")
    replicated = Tiling.replicated(2, 8)
    square = (16, 16)
    assert [s.kind for s in plan(rows, columns, square)] == ["all-to-all"]
    assert [s.kind for s in plan(replicated, rows, square)] == ["slice"]
    assert [s.kind for s in plan(rows, replicated, square)] == ["gather"]
    assert [s.kind for s in plan(rows, tiling("{devices=[8,1]7,6,5,4,3,2,1,0}"), square)] == ["permute"]
    # 2 row tiles refined into 8: no communication, a slice within each partition's tile
    halves = tiling("{devices=[2,1,4]<=[8] last_tile_dim_replicate}")
    assert [s.kind for s in plan(halves, rows, square)] == ["slice"]
    assert plan(rows, rows, square) == []
    # uneven: padded tiles do not split evenly in an all-to-all, and 10 rows in halves of 5
    # are not 4 tiles of 2 rows each (the 8-tile of rows 4..5 straddles both halves)
    assert [s.kind for s in plan(rows, columns, (10, 16))] == ["gather", "slice"]
    assert [s.kind for s in plan(halves, rows, (10, 16))] == ["gather", "slice"]
    assert [s.kind for s in plan(halves, rows, (12, 16))] == ["gather", "slice"]
    assert [s.kind for s in plan(halves, rows, (32, 16))] == ["slice"]


def run(text: str, arguments, options=None):
    from mlirxla import frontdoor
    from mlirxla.context import new_context
    from mlirxla.runtime.driver import execute_sharded

    module = frontdoor.import_bytes(text.encode(), "-", new_context()).module
    return execute_sharded(module, arguments, options=options)


RESHARDS = """
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%a: tensor<16x16xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}) -> (tensor<16x16xf32> {mhlo.sharding = "{devices=[1,8]<=[8]}"}, tensor<16x16xf32> {mhlo.sharding = "{devices=[8,1]7,6,5,4,3,2,1,0}"}, tensor<16xf32> {mhlo.sharding = "{replicated}"}, tensor<8x16xf32> {mhlo.sharding = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"}) {
    %0 = stablehlo.negate %a : tensor<16x16xf32>
    %init = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %1 = stablehlo.reduce(%a init: %init) applies stablehlo.maximum across dimensions = [0] : (tensor<16x16xf32>, tensor<f32>) -> tensor<16xf32>
    %2 = "stablehlo.sort"(%a) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %lt = stablehlo.compare LT, %x, %y : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    }) {dimension = 0 : i64} : (tensor<16x16xf32>) -> tensor<16x16xf32>
    %3 = stablehlo.slice %2 [4:12, 0:16] : (tensor<16x16xf32>) -> tensor<8x16xf32>
    %4 = stablehlo.iota dim = 0 : tensor<16x16xf32>
    %5 = stablehlo.add %0, %4 : tensor<16x16xf32>
    return %5, %0, %1, %3 : tensor<16x16xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<8x16xf32>
  }
}"""


def test_reshards_reductions_and_fallbacks_match_numpy():
    a = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)
    added, negated, largest, sliced = run(RESHARDS, [a])
    np.testing.assert_array_equal(added, -a + np.arange(16, dtype=np.float32)[:, None])
    np.testing.assert_array_equal(negated, -a)
    np.testing.assert_array_equal(largest, a.max(axis=0))
    np.testing.assert_array_equal(sliced, np.sort(a, axis=0)[4:12])


PASSING_THROUGH = """
module attributes {mhlo.num_partitions = 4 : i32} {
  func.func @main(%a: tensor<8x6xf32> {mhlo.sharding = "{devices=[4,1]<=[4]}"}, %i: tensor<8x1xi32> {mhlo.sharding = "{devices=[4,1]<=[4]}"}) -> (tensor<8x8xf32>, tensor<8x4xf32>, tensor<8x12xf32>, tensor<8x6xf32>, tensor<8x6xf32>, tensor<8xf32>, tensor<8x6xf32>) {
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %c3 = stablehlo.constant dense<3> : tensor<i32>
    %two = stablehlo.constant dense<[2]> : tensor<1xi32>
    %0 = stablehlo.pad %a, %zero, low = [0, 1], high = [0, 1], interior = [0, 0] : (tensor<8x6xf32>, tensor<f32>) -> tensor<8x8xf32>
    %1 = stablehlo.slice %a [0:8, 1:5] : (tensor<8x6xf32>) -> tensor<8x4xf32>
    %2 = stablehlo.concatenate %a, %a, dim = 1 : (tensor<8x6xf32>, tensor<8x6xf32>) -> tensor<8x12xf32>
    %3 = stablehlo.reverse %a, dims = [1] : tensor<8x6xf32>
    %4 = "stablehlo.sort"(%a) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %lt = stablehlo.compare LT, %x, %y : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    }) {dimension = 1 : i64} : (tensor<8x6xf32>) -> tensor<8x6xf32>
    %5 = "stablehlo.gather"(%a, %i) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [1], operand_batching_dims = [0], start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 1>, slice_sizes = array<i64: 1, 1>}> : (tensor<8x6xf32>, tensor<8x1xi32>) -> tensor<8xf32>
    %6 = "stablehlo.scatter"(%a, %two, %5) <{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [0], inserted_window_dims = [1], scatter_dims_to_operand_dims = [1]>}> ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      stablehlo.return %y : tensor<f32>
    }) : (tensor<8x6xf32>, tensor<1xi32>, tensor<8xf32>) -> tensor<8x6xf32>
    %7 = stablehlo.dynamic_slice %a, %c0, %c3, sizes = [8, 2] : (tensor<8x6xf32>, tensor<i32>, tensor<i32>) -> tensor<8x2xf32>
    %8 = stablehlo.dynamic_update_slice %6, %7, %c0, %c0 : (tensor<8x6xf32>, tensor<8x2xf32>, tensor<i32>, tensor<i32>) -> tensor<8x6xf32>
    return %0, %1, %2, %3, %4, %5, %8 : tensor<8x8xf32>, tensor<8x4xf32>, tensor<8x12xf32>, tensor<8x6xf32>, tensor<8x6xf32>, tensor<8xf32>, tensor<8x6xf32>
  }
}"""


def test_ops_tiled_on_dims_they_pass_through_run_on_each_tile(tmp_path):
    """Pads, slices, concatenates, reverses, sorts, gathers, scatters and dynamic
    (update-)slices of a batch-sharded value, each touching only the other dim, give numpy's
    values and run on each partition's rows: none gathers its operands (XLA keeps such dims
    sharded; qr's pad and lu's pivot loop gathered whole batches)."""
    a = np.random.default_rng(1).standard_normal((8, 6)).astype(np.float32)
    i = np.array([[5], [0], [3], [3], [1], [2], [4], [0]], dtype=np.int32)
    padded, sliced, joined, reversed_, ordered, picked, updated = run(PASSING_THROUGH, [a, i])
    np.testing.assert_array_equal(padded, np.pad(a, ((0, 0), (1, 1))))
    np.testing.assert_array_equal(sliced, a[:, 1:5])
    np.testing.assert_array_equal(joined, np.concatenate([a, a], axis=1))
    np.testing.assert_array_equal(reversed_, a[:, ::-1])
    np.testing.assert_array_equal(ordered, np.sort(a, axis=1))
    np.testing.assert_array_equal(picked, a[np.arange(8), i[:, 0]])
    expected = a.copy()
    expected[:, 2] = a[np.arange(8), i[:, 0]]
    expected[:, 0:2] = a[:, 3:5]
    np.testing.assert_array_equal(updated, expected)
    source = tmp_path / "passing.mlir"
    source.write_text(PASSING_THROUGH)
    done = subprocess.run([sys.executable, "-m", "mlirxla.tools.opt", str(source), "-p", "xhlo-sharding-propagation,xhlo-spmd-partitioner",
                           f"--dump-to={tmp_path / 'dump'}"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "all_gather" not in done.stdout and "all_to_all" not in done.stdout
    [report] = [p for p in (tmp_path / "dump").iterdir() if p.name.endswith("spmd-partitioner.txt")]
    assert report.read_text().split("fallbacks")[1].split("ops (")[0].splitlines()[1:] == ["  none", ""]


def test_the_dump_says_what_each_op_became_and_what_fell_back(tmp_path):
    source = tmp_path / "reshards.mlir"
    source.write_text(RESHARDS)
    done = subprocess.run([sys.executable, "-m", "mlirxla.tools.opt", str(source), "-p", "xhlo-sharding-propagation,xhlo-spmd-partitioner",
                           f"--dump-to={tmp_path / 'dump'}", "-o", os.devnull], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    [report] = [p for p in (tmp_path / "dump").iterdir() if p.name.endswith("spmd-partitioner.txt")]
    text = report.read_text()
    assert "spmd partitioner: 8 partitions" in text
    assert "all-to-all: 1," in text and "collective-permute: 1," in text
    fallbacks = text.split("fallbacks")[1].split("ops (")[0]
    assert "xhlo.sort" in fallbacks and "xhlo.slice" in fallbacks and "xhlo.reduce" not in fallbacks
    assert "local reduce, partial results combined by maximum over groups of 8" in text


def test_the_cpu_pipeline_partitions_what_it_compiles(context):
    from mlirxla import frontdoor
    from mlirxla.pipelines.runner import PipelineRunner, RunOptions
    from mlirxla.pipelines import named_pipeline
    from mlirxla.transforms.sharding_remover import partitioning_need

    module = frontdoor.import_bytes(RESHARDS.encode(), "-", context).module
    assert partitioning_need(module) is not None
    PipelineRunner(module, RunOptions()).compile(named_pipeline("cpu"))
    assert partitioning_need(module) is None


# 10 rows over 4 tiles (3 each, the last 1 row and 2 of padding), 6 columns over 8 (one
# each, two tiles all padding), 10 contracted over 8: every op combining a padded dim masks it
UNEVEN = """
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%a: tensor<10x6xf32> {mhlo.sharding = "{devices=[4,2]<=[8]}"}, %c: tensor<6x10xf32> {mhlo.sharding = "{devices=[1,8]<=[8]}"}) -> (tensor<10x6xf32> {mhlo.sharding = "{devices=[1,8]<=[8]}"}, tensor<6xf32> {mhlo.sharding = "{replicated}"}, tensor<6xf32> {mhlo.sharding = "{devices=[8]<=[8]}"}, tensor<6x6xf32> {mhlo.sharding = "{devices=[4,2]<=[8]}"}) {
    %ea = stablehlo.exponential %a {mhlo.sharding = "{devices=[4,2]<=[8]}"} : tensor<10x6xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %sum = stablehlo.reduce(%ea init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<10x6xf32>, tensor<f32>) -> tensor<6xf32>
    %nea = stablehlo.negate %ea {mhlo.sharding = "{devices=[4,2]<=[8]}"} : tensor<10x6xf32>
    %lowest = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %max = stablehlo.reduce(%nea init: %lowest) applies stablehlo.maximum across dimensions = [0] : (tensor<10x6xf32>, tensor<f32>) -> tensor<6xf32>
    %ec = stablehlo.exponential %c {mhlo.sharding = "{devices=[1,8]<=[8]}"} : tensor<6x10xf32>
    %dot = stablehlo.dot_general %ec, %ea, contracting_dims = [1] x [0] {mhlo.sharding = "{devices=[4,2]<=[8]}"} : (tensor<6x10xf32>, tensor<10x6xf32>) -> tensor<6x6xf32>
    %neg = stablehlo.negate %a {mhlo.sharding = "{devices=[1,8]<=[8]}"} : tensor<10x6xf32>
    return %neg, %sum, %max, %dot : tensor<10x6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6x6xf32>
  }
}"""


def test_uneven_shardings_are_padded_and_masked(tmp_path):
    from mlirxla.pipelines.runner import RunOptions

    rng = np.random.default_rng(0)
    # exp(a) > 1 everywhere, so the padding (exp(0) = 1, and -1 for the maximum) would show
    a = (np.abs(rng.standard_normal((10, 6))) + 0.5).astype(np.float32)
    c = rng.standard_normal((6, 10)).astype(np.float32)
    negated, total, largest, product = run(UNEVEN, [a, c], RunOptions(dump_to=str(tmp_path)))
    expected = single_device(UNEVEN, [a, c])
    np.testing.assert_array_equal(negated, expected[0])
    np.testing.assert_allclose(total, expected[1], rtol=1e-6)
    np.testing.assert_array_equal(largest, expected[2])
    np.testing.assert_allclose(product, expected[3], rtol=1e-5)
    np.testing.assert_allclose(product, np.exp(c) @ np.exp(a), rtol=1e-5)
    [report] = [p for p in tmp_path.iterdir() if p.name.endswith("spmd-partitioner.txt")]
    text = report.read_text()
    assert "fallbacks (operands gathered, op run whole, result sliced):\n  none" in text
    assert text.count("local reduce, partial results combined") == 2
    # the product's 6 rows over 4 tiles: partial sums of 8 (padded) rows scattered
    assert "reduce-scatter over 2 group(s) of 4, [8, 3]" in text


def single_device(text: str, arguments):
    """The program on one device, its shardings dropped."""
    return run(re.sub(r'\s*\{mhlo.sharding = "[^"]*"\}', "", text.replace("mhlo.num_partitions = 8", "mhlo.num_partitions = 1")), arguments)


def partial_sum_program(result_sharding: str, lhs: str = "{devices=[2,4]<=[8]}",
                        rhs: str = "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}") -> str:
    """A [64,128] x [128,32] dot, by default on a 2x4 mesh, rows on x and the contraction on y."""
    return f"""
module attributes {{mhlo.num_partitions = 8 : i32}} {{
  func.func @main(%a: tensor<64x128xf32> {{mhlo.sharding = "{lhs}"}}, %b: tensor<128x32xf32> {{mhlo.sharding = "{rhs}"}}) -> (tensor<64x32xf32> {{mhlo.sharding = "{result_sharding}"}}) {{
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<64x128xf32>, tensor<128x32xf32>) -> tensor<64x32xf32>
    return %0 : tensor<64x32xf32>
  }}
}}"""


def test_partial_sums_already_tiled_on_the_scattered_dim_finish_as_a_reduce_scatter(tmp_path):
    from mlirxla.pipelines.runner import RunOptions

    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((64, 128)).astype(np.float32), rng.standard_normal((128, 32)).astype(np.float32)
    # the partial products hold 2 row tiles; the result's 8 row tiles split each 4 ways
    [product] = run(partial_sum_program("{devices=[8,1]<=[8]}"), [a, b], RunOptions(dump_to=str(tmp_path)))
    np.testing.assert_allclose(product, a @ b, rtol=1e-5, atol=1e-5)
    [report] = [p for p in tmp_path.iterdir() if p.name.endswith("spmd-partitioner.txt")]
    text = report.read_text()
    assert "reduce-scatter over 2 group(s) of 4, [32, 32]" in text and "all-reduce" not in text


def all_reduces_feeding_dynamic_slices(text: str) -> list[int]:
    """Per all-reduce whose result a dynamic-slice reads, how many dims that slice cuts."""
    from mlirxla import frontdoor
    from mlirxla.context import new_context
    from mlirxla.dialects.xhlo.types import shape_of
    from mlirxla.ir_queries import ops_named
    from mlirxla.mlir import ir
    from mlirxla.transforms.sharding_propagation import ShardingPropagationPass
    from mlirxla.transforms.spmd_partitioner import SpmdPartitionerPass

    context = new_context()
    module = frontdoor.import_bytes(text.encode(), "-", context).module
    with context, ir.Location.unknown():
        ShardingPropagationPass().run(module)
        SpmdPartitionerPass().run(module)
    cuts = []
    for op in ops_named(module, "xhlo.all_reduce"):
        for use in op.results[0].uses:
            if use.owner.name == "xhlo.dynamic_slice":
                cuts.append(sum(a != b for a, b in zip(shape_of(op.results[0].type), shape_of(use.owner.results[0].type))))
    return cuts


def test_no_all_reduce_is_sliced_on_one_dim():
    """XLA's ReduceScatterCreator turns an all-reduce sliced on one dim by the group's ranks
    into a reduce-scatter (not one sliced on several: allow_multiple_split_dims is false);
    the partitioner emits those reduce-scatters itself, so only the latter remain."""
    assert all_reduces_feeding_dynamic_slices(partial_sum_program("{devices=[8,1]<=[8]}")) == []
    assert all_reduces_feeding_dynamic_slices(partial_sum_program("{devices=[2,4]<=[8]}")) == []
    assert all_reduces_feeding_dynamic_slices(UNEVEN) == []
    assert all_reduces_feeding_dynamic_slices(RESHARDS) == []
    # a replicated partial sum over 8 partitions, the result tiled 2x4: sliced on both dims
    both = partial_sum_program("{devices=[2,4]<=[8]}", "{devices=[1,8]<=[8]}", "{devices=[8,1]<=[8]}")
    assert all_reduces_feeding_dynamic_slices(both) == [2]


# shard_map manual over "x" of a 2x2 mesh: inside it a constraint tiles the value over "y",
# and a loop whose body reads constants defined outside it doubles the value three times
PARTLY_MANUAL_LOOP = """
module @partly_manual_loop attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x2xf32> {mhlo.sharding = "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"}) -> (tensor<4x2xf32> {mhlo.sharding = "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"}) {
    %zero = stablehlo.constant dense<0> : tensor<i32>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %three = stablehlo.constant dense<3> : tensor<i32>
    %0 = stablehlo.custom_call @Sharding(%arg0) {mhlo.sharding = "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"} : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %1 = stablehlo.custom_call @SPMDFullToShardShape(%0) {mhlo.sharding = "{devices=[1,1,2,2]<=[4] last_tile_dims={manual, replicated}}"} : (tensor<4x2xf32>) -> tensor<2x2xf32>
    %2 = stablehlo.custom_call @Sharding(%1) {mhlo.sharding = "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"} : (tensor<2x2xf32>) -> tensor<2x2xf32>
    %3:2 = stablehlo.while(%i = %zero, %v = %2) : tensor<i32>, tensor<2x2xf32>
      cond {
        %c = stablehlo.compare LT, %i, %three, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %c : tensor<i1>
      } do {
        %twice = stablehlo.add %v, %v : tensor<2x2xf32>
        %next = stablehlo.add %i, %one : tensor<i32>
        stablehlo.return %next, %twice : tensor<i32>, tensor<2x2xf32>
      }
    %4 = stablehlo.custom_call @Sharding(%3#1) {mhlo.sharding = "{devices=[1,1,2,2]<=[4] last_tile_dims={manual, replicated}}"} : (tensor<2x2xf32>) -> tensor<2x2xf32>
    %5 = stablehlo.custom_call @SPMDShardToFullShape(%4) {mhlo.sharding = "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"} : (tensor<2x2xf32>) -> tensor<4x2xf32>
    return %5 : tensor<4x2xf32>
  }
}
"""


def test_a_loop_copied_as_written_in_a_partly_manual_region_reads_its_captures_and_whole_operands():
    """An op in a shard_map region is copied as written with its regions; the constants its
    body captured once kept pointing at the erased originals (a segfault in jax's
    test_manual_mode_mix_map), and an operand the constraint had tiled over "y" gave the loop
    carried types its results did not have."""
    from mlirxla.runtime.client import Client

    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    [out] = Client(device_count=4).compile(PARTLY_MANUAL_LOOP).execute_numpy([x])
    np.testing.assert_array_equal(out, 8 * x)


# jax's lowering of a shard_map manual over "j" nested in one manual over "i" (x * x)
NESTED_SHARD_MAPS = """
module @nested_shard_maps attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["i"=2, "j"=2]> {stablehlo.mesh = {axes = [{name = "i", size = 2 : i64}, {name = "j", size = 2 : i64}]}}
  func.func public @main(%arg0: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"i"}, {"j"}]>}) -> (tensor<4x8xf32> {jax.result_info = "result"}) {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"i", ?}, {?}]>] out_shardings=[<@mesh, [{"i", ?}, {?}]>] manual_axes={"i"} (%arg1: tensor<2x8xf32>) {
      %1 = sdy.manual_computation(%arg1) in_shardings=[<@mesh, [{?}, {"j", ?}]>] out_shardings=[<@mesh, [{?}, {"j", ?}]>] manual_axes={"j"} (%arg2: tensor<2x4xf32>) {
        %2 = stablehlo.multiply %arg2, %arg2 : tensor<2x4xf32>
        sdy.return %2 : tensor<2x4xf32>
      } : (tensor<2x8xf32>) -> tensor<2x8xf32>
      sdy.return %1 : tensor<2x8xf32>
    } : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return %0 : tensor<4x8xf32>
  }
}
"""


@pytest.mark.jax
def test_a_shard_map_nested_in_another_cuts_its_tile_from_the_whole_value():
    """Inside the outer region the inner one's operand is copied as written, whole in "j";
    its @SPMDFullToShardShape once took that whole value for the tile (shard_map_test's
    test_grad_nested_partial_auto: shapes that differ, the compile refused)."""
    from mlirxla.runtime.client import Client

    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    [out] = Client(device_count=4).compile(NESTED_SHARD_MAPS).execute_numpy([x])
    np.testing.assert_array_equal(out, x * x)


PROGRAMS = ["matmul_rows", "matmul_contracting", "matmul_2d", "mlp_2d", "elementwise_reduce", "transformer", "mlp_grad", "scan"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The sharded programs lowered by jax for 8 CPU devices, with jax's results (a child
    process: jax reads its device count once)."""
    pytest.importorskip("jax")
    out = tmp_path_factory.mktemp("spmd")
    done = subprocess.run([sys.executable, os.path.join(REPOSITORY, "examples", "spmd_programs.py"), str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.jax
@pytest.mark.slow
@pytest.mark.parametrize("name", PROGRAMS)
def test_sharded_jax_programs_match_jax_on_8_devices(exported, name, tmp_path):
    from mlirxla import frontdoor
    from mlirxla.context import new_context
    from mlirxla.pipelines.runner import RunOptions
    from mlirxla.runtime.driver import execute_sharded

    module = frontdoor.import_bytes((exported / f"{name}.mlir").read_bytes(), name, new_context()).module
    data = np.load(exported / f"{name}.npz")
    arguments = [data[f"arg{i}"] for i in range(sum(key.startswith("arg") for key in data))]
    [result] = execute_sharded(module, arguments, options=RunOptions(dump_to=str(tmp_path)))
    np.testing.assert_allclose(result, data["out0"], rtol=1e-4, atol=1e-5)
    [report] = [p for p in tmp_path.iterdir() if p.name.endswith("spmd-partitioner.txt")]
    # none of these programs needs the fallback
    assert report.read_text().split("fallbacks")[1].split("ops (")[0].strip().endswith("none")


@pytest.mark.jax
@pytest.mark.slow
def test_benchmark_reports_collectives_of_both(tmp_path):
    done = subprocess.run([sys.executable, os.path.join(REPOSITORY, "benchmarks", "spmd_vs_xla.py"), "--size", "256", "--json"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    programs = json.loads(done.stdout.splitlines()[-1])["programs"]
    for name, columns in programs.items():
        assert columns["mlirxla"]["matches"], name
        assert columns["mlirxla"]["bytes_moved_per_device"] <= columns["xla"]["bytes_moved_per_device"], name
        # combined as XLA combines them (mlp_grad's two gradient all-reduces are one)
        assert columns["mlirxla"]["collectives"] == columns["xla"]["collectives"], name
    assert programs["mlp_grad"]["mlirxla"]["collectives_before_combining"] == {"all-reduce": 2}


# jax's `lax.cond(p, pmap(f), pmap(g), x)` over 4 devices: each branch a manual region, one
# doubling each row, the other summing the rows over the devices
CONDITIONAL_OF_MANUAL_REGIONS = """
module @cond_of_pmap attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%index: tensor<i32>, %x: tensor<4x2xf32>) -> (tensor<4x2xf32> {mhlo.sharding = "{devices=[4,1]<=[4]}"}) {
    %0 = "stablehlo.case"(%index) ({
      %1 = stablehlo.custom_call @Sharding(%x) {mhlo.sharding = "{devices=[4,1]<=[4]}"} : (tensor<4x2xf32>) -> tensor<4x2xf32>
      %2 = stablehlo.custom_call @SPMDFullToShardShape(%1) {mhlo.sharding = "{manual}"} : (tensor<4x2xf32>) -> tensor<1x2xf32>
      %3 = stablehlo.add %2, %2 : tensor<1x2xf32>
      %4 = stablehlo.custom_call @Sharding(%3) {mhlo.sharding = "{manual}"} : (tensor<1x2xf32>) -> tensor<1x2xf32>
      %5 = stablehlo.custom_call @SPMDShardToFullShape(%4) {mhlo.sharding = "{devices=[4,1]<=[4]}"} : (tensor<1x2xf32>) -> tensor<4x2xf32>
      stablehlo.return %5 : tensor<4x2xf32>
    }, {
      %1 = stablehlo.custom_call @Sharding(%x) {mhlo.sharding = "{devices=[4,1]<=[4]}"} : (tensor<4x2xf32>) -> tensor<4x2xf32>
      %2 = stablehlo.custom_call @SPMDFullToShardShape(%1) {mhlo.sharding = "{manual}"} : (tensor<4x2xf32>) -> tensor<1x2xf32>
      %3 = "stablehlo.all_reduce"(%2) ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %s = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %s : tensor<f32>
      }) {channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids} : (tensor<1x2xf32>) -> tensor<1x2xf32>
      %4 = stablehlo.custom_call @Sharding(%3) {mhlo.sharding = "{manual}"} : (tensor<1x2xf32>) -> tensor<1x2xf32>
      %5 = stablehlo.custom_call @SPMDShardToFullShape(%4) {mhlo.sharding = "{devices=[4,1]<=[4]}"} : (tensor<1x2xf32>) -> tensor<4x2xf32>
      stablehlo.return %5 : tensor<4x2xf32>
    }) : (tensor<i32>) -> tensor<4x2xf32>
    return %0 : tensor<4x2xf32>
  }
}
"""


@pytest.mark.parametrize("index", [0, 1])
def test_a_conditional_partitions_the_manual_regions_of_its_branches(index):
    """A manual region inside a conditional's branch (pmap under `lax.cond`, pmap_test's
    test_num_replicas_with_switch) is partitioned there: the conditional once fell back to
    running whole, its branches left unpartitioned, and the compile was refused."""
    from mlirxla.runtime.client import Client

    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    [out] = Client(device_count=4).compile(CONDITIONAL_OF_MANUAL_REGIONS).execute_numpy([np.int32(index), x])
    expected = 2 * x if index == 0 else np.broadcast_to(x.sum(axis=0), (4, 2))
    np.testing.assert_array_equal(out, expected)


# a conditional over sharded values: rows in, columns out, a reduce over the sharded rows
SHARDED_BRANCHES = """
module @sharded_branches attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%index: tensor<i32>, %x: tensor<8x4xf32> {mhlo.sharding = "{devices=[4,1]<=[4]}"}, %y: tensor<8x4xf32>) -> (tensor<8x4xf32> {mhlo.sharding = "{devices=[1,4]<=[4]}"}, tensor<4xf32>) {
    %0:2 = "stablehlo.case"(%index) ({
      %n = stablehlo.negate %x : tensor<8x4xf32>
      %a = stablehlo.add %n, %y : tensor<8x4xf32>
      %z = stablehlo.constant dense<0.0> : tensor<f32>
      %r = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [0] : (tensor<8x4xf32>, tensor<f32>) -> tensor<4xf32>
      stablehlo.return %a, %r : tensor<8x4xf32>, tensor<4xf32>
    }, {
      %m = stablehlo.multiply %x, %y : tensor<8x4xf32>
      %z = stablehlo.constant dense<0xFF800000> : tensor<f32>
      %r = stablehlo.reduce(%y init: %z) applies stablehlo.maximum across dimensions = [0] : (tensor<8x4xf32>, tensor<f32>) -> tensor<4xf32>
      stablehlo.return %m, %r : tensor<8x4xf32>, tensor<4xf32>
    }) : (tensor<i32>) -> (tensor<8x4xf32>, tensor<4xf32>)
    return %0#0, %0#1 : tensor<8x4xf32>, tensor<4xf32>
  }
}
"""


@pytest.mark.parametrize("index", [0, 1, 5])
def test_a_conditional_over_sharded_values_matches_numpy(index):
    """Branches partitioned in place read their operands as sharded and reshard what they
    return to the conditional's results (an index out of range takes the last branch)."""
    from mlirxla.runtime.client import Client

    rng = np.random.default_rng(3)
    x, y = (rng.standard_normal((8, 4)).astype(np.float32) for _ in range(2))
    summed, reduced = Client(device_count=4).compile(SHARDED_BRANCHES).execute_numpy([np.int32(index), x, y])
    np.testing.assert_allclose(summed, -x + y if index == 0 else x * y, rtol=1e-6)
    np.testing.assert_allclose(reduced, x.sum(axis=0) if index == 0 else y.max(axis=0), rtol=1e-5)
