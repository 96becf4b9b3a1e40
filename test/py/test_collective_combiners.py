"""xhlo-all-reduce-combiner and xhlo-all-gather-combiner: which collectives combine (counts
before and after, from the dump), that dependent ones never do nor form a cycle, and that the
combined programs compute what the separate collectives computed, on 4 and 8 devices."""

import subprocess
import sys

import numpy as np

from mlirxla import frontdoor
from mlirxla.context import new_context
from mlirxla.pipelines.runner import RunOptions
from mlirxla.runtime import driver
from mlirxla.runtime.devices import DeviceGrid, execute_on_devices


def reducer(op: str) -> str:
    return f"""({{
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = stablehlo.{op} %x, %y : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }})"""


def all_reduce(result: str, operand: str, op: str, channel: int, shape: str, groups: str = "[[0, 1, 2, 3]]", groups_type: str = "1x4") -> str:
    return (f'    {result} = "stablehlo.all_reduce"({operand}) {reducer(op)} {{channel_handle = #stablehlo.channel_handle<handle = {channel}, type = 1>, '
            f'replica_groups = dense<{groups}> : tensor<{groups_type}xi64>, use_global_device_ids}} : (tensor<{shape}xf32>) -> tensor<{shape}xf32>')


def all_gather(result: str, operand: str, dim: int, channel: int, shape: str, result_shape: str) -> str:
    return (f'    {result} = "stablehlo.all_gather"({operand}) {{all_gather_dim = {dim} : i64, channel_handle = #stablehlo.channel_handle<handle = {channel}, type = 1>, '
            f'replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}} : (tensor<{shape}xf32>) -> tensor<{result_shape}xf32>')


def module(signature: str, body: list[str], returned: str) -> str:
    return ("module attributes {mhlo.num_partitions = 4 : i32} {\n  func.func @main" + signature + " {\n"
            + "\n".join(body) + f"\n    return {returned}\n  }}\n}}\n")


ALL_REDUCES = module(
    "(%a: tensor<4xf32>, %b: tensor<8xf32>, %c: tensor<2xf32>) -> (tensor<4xf32>, tensor<8xf32>, tensor<2xf32>, tensor<4xf32>, tensor<2xf32>)",
    [all_reduce("%0", "%a", "add", 1, "4"),
     "    %n = stablehlo.negate %0 : tensor<4xf32>",           # uses %0 before %1: moves after the combined op
     all_reduce("%1", "%b", "add", 2, "8"),                    # combines with %0
     all_reduce("%2", "%n", "add", 3, "4"),                    # depends on %0: never with it
     all_reduce("%3", "%c", "maximum", 4, "2"),                # another reducer
     all_reduce("%4", "%c", "add", 5, "2", "[[0, 1], [2, 3]]", "2x2")],  # other groups
    "%0, %1, %3, %2, %4 : tensor<4xf32>, tensor<8xf32>, tensor<2xf32>, tensor<4xf32>, tensor<2xf32>")

# add over {%5, %8} combines; then max over {%6, %9} would be a cycle (%9 reads the combined
# add through %n5, which reads %6 through %n6): it must stay apart
CROSSED = module(
    "(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)",
    [all_reduce("%5", "%a", "add", 1, "4"),
     all_reduce("%6", "%b", "maximum", 2, "4"),
     "    %n6 = stablehlo.negate %6 : tensor<4xf32>",
     all_reduce("%8", "%n6", "add", 3, "4"),
     "    %n5 = stablehlo.add %5, %8 : tensor<4xf32>",
     all_reduce("%9", "%n5", "maximum", 4, "4")],
    "%8, %9 : tensor<4xf32>, tensor<4xf32>")

ALL_GATHERS = module(
    "(%a: tensor<2x3xf32>, %b: tensor<1x3xf32>) -> (tensor<8x3xf32>, tensor<4x3xf32>, tensor<2x12xf32>, tensor<32x3xf32>)",
    [all_gather("%0", "%a", 0, 1, "2x3", "8x3"),
     all_gather("%1", "%b", 0, 2, "1x3", "4x3"),               # combines with %0
     all_gather("%2", "%a", 1, 3, "2x3", "2x12"),              # another dim
     all_gather("%3", "%0", 0, 4, "8x3", "32x3")],             # depends on %0
    "%0, %1, %2, %3 : tensor<8x3xf32>, tensor<4x3xf32>, tensor<2x12xf32>, tensor<32x3xf32>")


def run_on_4(text: str, arguments: list[list[np.ndarray]], dump_to):
    program = frontdoor.import_text(text, "combining.mlir", new_context()).module
    with program.context:
        executable = driver.compile_entry(program, "main", backend="cpu", options=RunOptions(dump_to=str(dump_to)))[0]
    return execute_on_devices([executable] * 4, arguments, DeviceGrid(1, 4))


def dumped(folder, name: str) -> str:
    [report] = [p for p in folder.iterdir() if p.name.endswith(name)]
    return report.read_text()


def in_rank_order(values, combine=np.add):
    total = values[0]
    for value in values[1:]:
        total = combine(total, value)
    return total


def test_independent_all_reduces_combine_and_compute_the_same(tmp_path):
    rng = np.random.default_rng(0)
    arguments = [[rng.standard_normal(n).astype(np.float32) for n in (4, 8, 2)] for _ in range(4)]
    outputs = run_on_4(ALL_REDUCES, arguments, tmp_path)
    text = dumped(tmp_path, "all-reduce-combiner.txt")
    assert text.startswith("xhlo-all-reduce-combiner: all-reduce 5 -> 4")
    assert "2 x all_reduce: [4]xf32, [8]xf32 (48 bytes)" in text
    summed = in_rank_order([a[0] for a in arguments])
    for device in range(4):
        np.testing.assert_array_equal(outputs[device][0], summed)
        np.testing.assert_array_equal(outputs[device][1], in_rank_order([a[1] for a in arguments]))
        np.testing.assert_array_equal(outputs[device][2], in_rank_order([a[2] for a in arguments], np.maximum))
        np.testing.assert_array_equal(outputs[device][3], in_rank_order([-summed] * 4))
        pair = [0, 1] if device < 2 else [2, 3]
        np.testing.assert_array_equal(outputs[device][4], in_rank_order([arguments[d][2] for d in pair]))


def test_combining_never_makes_a_cycle(tmp_path):
    rng = np.random.default_rng(1)
    arguments = [[rng.standard_normal(4).astype(np.float32) for _ in range(2)] for _ in range(4)]
    outputs = run_on_4(CROSSED, arguments, tmp_path)
    assert dumped(tmp_path, "all-reduce-combiner.txt").startswith("xhlo-all-reduce-combiner: all-reduce 4 -> 3")
    a = in_rank_order([x[0] for x in arguments])
    b = in_rank_order([x[1] for x in arguments], np.maximum)
    added = in_rank_order([-b] * 4)
    np.testing.assert_array_equal(outputs[3][0], added)
    np.testing.assert_array_equal(outputs[3][1], in_rank_order([a + added] * 4, np.maximum))


def test_independent_all_gathers_combine_and_compute_the_same(tmp_path):
    rng = np.random.default_rng(2)
    arguments = [[rng.standard_normal(s).astype(np.float32) for s in ((2, 3), (1, 3))] for _ in range(4)]
    outputs = run_on_4(ALL_GATHERS, arguments, tmp_path)
    text = dumped(tmp_path, "all-gather-combiner.txt")
    assert text.startswith("xhlo-all-gather-combiner: all-gather 4 -> 3")
    rows = np.concatenate([a[0] for a in arguments])
    for device in range(4):
        np.testing.assert_array_equal(outputs[device][0], rows)
        np.testing.assert_array_equal(outputs[device][1], np.concatenate([a[1] for a in arguments]))
        np.testing.assert_array_equal(outputs[device][2], np.concatenate([a[0] for a in arguments], axis=1))
        np.testing.assert_array_equal(outputs[device][3], np.concatenate([rows] * 4))


def test_the_threshold_keeps_large_groups_apart(tmp_path):
    source = tmp_path / "all_reduces.mlir"
    source.write_text(ALL_REDUCES)
    done = subprocess.run([sys.executable, "-m", "mlirxla.tools.opt", str(source), "-p", "xhlo-all-reduce-combiner{threshold-bytes=40}"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count('"xhlo.all_reduce"') == 5  # [4] + [8] floats are 48 bytes


# two gradients' partial sums over the batch, independent: one all-reduce after combining
GRADIENTS = """
module attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%x: tensor<64x16xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}, %d: tensor<64x8xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}) -> (tensor<16x8xf32> {mhlo.sharding = "{replicated}"}, tensor<16x16xf32> {mhlo.sharding = "{replicated}"}) {
    %g1 = stablehlo.dot_general %x, %d, contracting_dims = [0] x [0] : (tensor<64x16xf32>, tensor<64x8xf32>) -> tensor<16x8xf32>
    %g2 = stablehlo.dot_general %x, %x, contracting_dims = [0] x [0] : (tensor<64x16xf32>, tensor<64x16xf32>) -> tensor<16x16xf32>
    return %g1, %g2 : tensor<16x8xf32>, tensor<16x16xf32>
  }
}"""


def test_the_cpu_pipeline_combines_what_the_partitioner_inserted(tmp_path):
    rng = np.random.default_rng(3)
    x, d = rng.standard_normal((64, 16)).astype(np.float32), rng.standard_normal((64, 8)).astype(np.float32)
    program = frontdoor.import_text(GRADIENTS, "gradients.mlir", new_context()).module
    g1, g2 = driver.execute_sharded(program, [x, d], options=RunOptions(dump_to=str(tmp_path)))
    assert "all-reduce: 2," in dumped(tmp_path, "spmd-partitioner.txt")
    assert dumped(tmp_path, "all-reduce-combiner.txt").startswith("xhlo-all-reduce-combiner: all-reduce 2 -> 1")
    np.testing.assert_allclose(g1, x.T @ d, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(g2, x.T @ x, rtol=1e-5, atol=1e-5)
