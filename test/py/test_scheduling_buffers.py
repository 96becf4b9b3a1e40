"""xhlo-scheduling, the heap simulator and xhlo-buffer-assignment: packing rules, aliasing
rules, schedules that respect dependencies, and unchanged results on the JAX samples."""

import os
import subprocess
import sys

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.ir_queries import ops_named
from mlirxla.pipelines import named_pipeline
from mlirxla.pipelines.pipeline import Pipeline
from mlirxla.pipelines.runner import PipelineRunner
from mlirxla.runtime.client import Client
from mlirxla.transforms.buffer_assignment import BufferAssignmentPass, analyze, memory_summary
from mlirxla.transforms.heap_simulator import Buffer, best_fit, pack, peak_live
from mlirxla.transforms.scheduling import SchedulingPass

from .conftest import JAX_PROGRAMS, REPOSITORY, random_arguments, reference_outputs

SAMPLE_FILES = [
    "01_mlp_softmax.stablehlo.mlir",
    "02_scan_while_cond_gelu.stablehlo.mlir",
    "programs/mlp_softmax_small.stablehlo.mlir",
    "programs/scan.stablehlo.mlir",
]


# ----- heap simulator ---------------------------------------------------------------------

@pytest.mark.parametrize("order", ["spatial", "temporal"])
def test_disjoint_live_ranges_share_offsets(order):
    result = best_fit([Buffer("a", 100, 0, 2), Buffer("b", 100, 3, 5), Buffer("c", 100, 6, 9)], order)
    assert result.size == 100
    assert set(result.offsets.values()) == {0}


@pytest.mark.parametrize("order", ["spatial", "temporal"])
def test_overlapping_live_ranges_do_not_overlap_in_space(order):
    buffers = [Buffer("a", 100, 0, 4), Buffer("b", 60, 2, 6), Buffer("c", 30, 4, 8), Buffer("d", 10, 1, 9)]
    result = best_fit(buffers, order)
    for x in buffers:
        for y in buffers:
            if x.name < y.name and x.overlaps(y):
                ox, oy = result.offsets[x.name], result.offsets[y.name]
                assert ox + x.size <= oy or oy + y.size <= ox, (x, y, result.offsets)
    assert result.size >= peak_live(buffers)


def test_best_fit_picks_the_tightest_gap():
    # big1 [0,100) and big2 [130,230) stay live; a 50-byte hole at [100,130)? no: holes are
    # [100,130) of 30 bytes (from the dead "gap30") and [230, ...) at the top.
    buffers = [
        Buffer("big1", 100, 0, 10),
        Buffer("gap30", 30, 0, 1),
        Buffer("big2", 100, 0, 10),
        Buffer("small", 20, 5, 6),  # fits the 30-byte hole left by gap30: reuse, no growth
    ]
    result = best_fit(buffers, "temporal")
    assert result.offsets["small"] == result.offsets["gap30"]
    assert result.size == 230


def test_pack_keeps_the_smaller_order():
    buffers = [Buffer("a", 10, 0, 1), Buffer("b", 30, 1, 2), Buffer("c", 10, 2, 3), Buffer("d", 20, 0, 0)]
    chosen, sizes = pack(buffers)
    assert chosen.size == min(sizes.values())
    assert set(sizes) == {"spatial", "temporal"}


def test_alignment():
    result = best_fit([Buffer("a", 3, 0, 5), Buffer("b", 3, 0, 5)], "spatial", alignment=64)
    assert sorted(result.offsets.values()) == [0, 64]


# ----- scheduling and buffer assignment on small modules ---------------------------------

TWO_REDUCTIONS = """
func.func @main(%x: tensor<1024xf32>) -> (tensor<f32>) {
  %z = "xhlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %a = "xhlo.exponential"(%x) : (tensor<1024xf32>) -> tensor<1024xf32>
  %b = "xhlo.negate"(%x) : (tensor<1024xf32>) -> tensor<1024xf32>
  %c = "xhlo.reduce"(%a, %z) ({
  ^bb0(%p: tensor<f32>, %q: tensor<f32>):
    %s = "xhlo.add"(%p, %q) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%s) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 0>} : (tensor<1024xf32>, tensor<f32>) -> tensor<f32>
  %d = "xhlo.reduce"(%b, %z) ({
  ^bb0(%p: tensor<f32>, %q: tensor<f32>):
    %s = "xhlo.add"(%p, %q) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "xhlo.return"(%s) : (tensor<f32>) -> ()
  }) {dimensions = array<i64: 0>} : (tensor<1024xf32>, tensor<f32>) -> tensor<f32>
  %e = "xhlo.add"(%c, %d) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %e : tensor<f32>
}
"""


def load(text, context):
    return frontdoor.import_text(text, "test", context).module


def body_op_names(module):
    func = list(module.body.operations)[0]
    return [op.operation.name for op in func.regions[0].blocks[0].operations]


def test_list_schedule_beats_source_order(context):
    module = load(TWO_REDUCTIONS, context)
    before = memory_summary(module)
    assert SchedulingPass().run(module).changed
    assert body_op_names(module) == ["xhlo.constant", "xhlo.exponential", "xhlo.reduce", "xhlo.negate",
                                     "xhlo.reduce", "xhlo.add", "func.return"]
    after = memory_summary(module)
    assert before["temp"] == 2 * 4096 and after["temp"] == 4096 + 4  # one big temp at a time
    schedule = module.operation.attributes["xhlo.schedule"]
    assert "list" in str(schedule)
    # stable: a second run moves nothing and keeps the attribute
    assert not SchedulingPass().run(module).changed


def test_buffer_assignment_summary_attribute(context):
    module = load(TWO_REDUCTIONS, context)
    assert BufferAssignmentPass().run(module).changed
    text = str(module.operation.attributes["xhlo.buffer_assignment"])
    assert "parameter_bytes = 4096" in text and "live_out_bytes = 4" in text and "constant_bytes = 4" in text
    again = BufferAssignmentPass().run(module)
    assert not again.changed  # the same summary again: unchanged
    dumps = again.report.dump_files()
    assert set(dumps) == {"buffer-assignment.txt", "memory-usage-report.txt", "live-range.txt", "heap.svg"}
    assert "preallocated-temp" in dumps["buffer-assignment.txt"] and "<svg" in dumps["heap.svg"]


ALIASES = """
func.func @main(%x: tensor<256xf32>, %u: tensor<16xf32>, %i: tensor<i32>) -> (tensor<16x16xf32>, tensor<256xf32>) {
  %a = "xhlo.exponential"(%x) : (tensor<256xf32>) -> tensor<256xf32>
  %b = "xhlo.bitcast"(%a) : (tensor<256xf32>) -> tensor<16x16xf32>
  %c = "xhlo.copy"(%a) : (tensor<256xf32>) -> tensor<256xf32>
  %d = "xhlo.dynamic_update_slice"(%c, %u, %i) : (tensor<256xf32>, tensor<16xf32>, tensor<i32>) -> tensor<256xf32>
  return %b, %d : tensor<16x16xf32>, tensor<256xf32>
}
"""


def buffer_of(assignment, name):
    return next(b for b in assignment.buffers if any(v.name == name for v in b.values))


def test_aliasing_rules(context):
    module = load(ALIASES, context)
    a = analyze(module)
    assert buffer_of(a, "bitcast") is buffer_of(a, "exponential")  # bitcast aliases
    assert buffer_of(a, "copy") is not buffer_of(a, "exponential")  # copies do not
    assert buffer_of(a, "dynamic_update_slice") is buffer_of(a, "copy")  # in place: copy dies there
    assert {b.kind for b in a.buffers if b.values[0].name in ("exponential", "copy")} == {"maybe-live-out"}
    assert a.summary["temp_bytes"] == 0


def test_while_carried_values_share_one_buffer(context):
    text = """
func.func @main(%n: tensor<i32>, %x: tensor<64xf32>) -> tensor<64xf32> {
  %x0 = "xhlo.negate"(%x) : (tensor<64xf32>) -> tensor<64xf32>
  %w:2 = "xhlo.while"(%n, %x0) ({
  ^bb0(%i: tensor<i32>, %v: tensor<64xf32>):
    %c = "xhlo.compare"(%i, %n) {compare_type = "SIGNED", comparison_direction = "LT"} : (tensor<i32>, tensor<i32>) -> tensor<i1>
    "xhlo.return"(%c) : (tensor<i1>) -> ()
  }, {
  ^bb0(%i: tensor<i32>, %v: tensor<64xf32>):
    %t = "xhlo.exponential"(%v) : (tensor<64xf32>) -> tensor<64xf32>
    %s = "xhlo.tanh"(%t) : (tensor<64xf32>) -> tensor<64xf32>
    "xhlo.return"(%i, %s) : (tensor<i32>, tensor<64xf32>) -> ()
  }) : (tensor<i32>, tensor<64xf32>) -> (tensor<i32>, tensor<64xf32>)
  return %w#1 : tensor<64xf32>
}
"""
    module = load(text, context)
    a = analyze(module, share_elementwise=False)
    carried = buffer_of(a, "negate")
    assert carried.kind == "maybe-live-out"
    assert {v.name for v in carried.values} >= {"negate", "while.arg1", "tanh", "while#1"}
    exp = buffer_of(a, "exponential")
    assert exp.kind == "temp" and exp.size == 256
    # the condition's use of %n, an outer value, holds it until the while op
    sequence = a.sequence
    assert sequence.index("while") > sequence.index("tanh") > sequence.index("compare")


# the sort's result dies at the add writing the carried %y, but %y is live where the sort writes
SORT_INTO_CARRIED = """
func.func @main(%a: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %0:3 = stablehlo.while(%i = %zero, %x = %a, %y = %b) : tensor<i32>, tensor<8xf32>, tensor<8xf32>
  cond {
    %three = stablehlo.constant dense<3> : tensor<i32>
    %lt = stablehlo.compare LT, %i, %three, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %i, %one : tensor<i32>
    %nx = stablehlo.negate %x : tensor<8xf32>
    %s = "stablehlo.sort"(%x) ({
      ^bb0(%p: tensor<f32>, %q: tensor<f32>):
        %c = stablehlo.compare LT, %p, %q : (tensor<f32>, tensor<f32>) -> tensor<i1>
        stablehlo.return %c : tensor<i1>
    }) {dimension = 0 : i64, is_stable = false} : (tensor<8xf32>) -> tensor<8xf32>
    %r = stablehlo.add %y, %s : tensor<8xf32>
    stablehlo.return %next, %nx, %r : tensor<i32>, tensor<8xf32>, tensor<8xf32>
  }
  return %0#1, %0#2 : tensor<8xf32>, tensor<8xf32>
}
"""


def test_an_operand_joins_a_carried_buffer_only_when_it_is_free(context):
    """In-place sharing merges two buffers only when no value of one is live while the other
    is written: the sort's result must not take %y's buffer, read after the sort."""
    module = load(SORT_INTO_CARRIED, context)
    PipelineRunner(module).run(named_pipeline("cpu"))
    a = analyze(module)
    assert buffer_of(a, "sort") is not buffer_of(a, "while.arg2")
    arguments = [np.linspace(-1, 1, 8, dtype=np.float32), np.arange(8, dtype=np.float32)]
    executable = Client().compile(SORT_INTO_CARRIED)
    for got, expected in zip(executable.execute_numpy(arguments), reference_outputs(load(SORT_INTO_CARRIED, context), arguments)):
        np.testing.assert_array_equal(got, expected)


# lu's pivots to permutation: read two entries of the carried %p, then write each where the
# other was, by two scatters (one batch row here)
SWAPS_INTO_CARRIED = """
func.func @main(%pivots: tensor<8xi32>) -> tensor<8xi32> {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %start = stablehlo.iota dim = 0 : tensor<8xi32>
  %0:2 = stablehlo.while(%i = %zero, %p = %start) : tensor<i32>, tensor<8xi32>
  cond {
    %eight = stablehlo.constant dense<8> : tensor<i32>
    %lt = stablehlo.compare LT, %i, %eight, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %j = stablehlo.dynamic_slice %pivots, %i, sizes = [1] : (tensor<8xi32>, tensor<i32>) -> tensor<1xi32>
    %pi = stablehlo.dynamic_slice %p, %i, sizes = [1] : (tensor<8xi32>, tensor<i32>) -> tensor<1xi32>
    %jj = stablehlo.reshape %j : (tensor<1xi32>) -> tensor<i32>
    %pj = stablehlo.dynamic_slice %p, %jj, sizes = [1] : (tensor<8xi32>, tensor<i32>) -> tensor<1xi32>
    %ii = stablehlo.reshape %i : (tensor<i32>) -> tensor<1xi32>
    %p1 = "stablehlo.scatter"(%p, %ii, %pj) ({
      ^bb0(%old: tensor<i32>, %new: tensor<i32>):
        stablehlo.return %new : tensor<i32>
    }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [0], scatter_dims_to_operand_dims = [0]>, indices_are_sorted = true, unique_indices = true} : (tensor<8xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<8xi32>
    %p2 = "stablehlo.scatter"(%p1, %j, %pi) ({
      ^bb0(%old: tensor<i32>, %new: tensor<i32>):
        stablehlo.return %new : tensor<i32>
    }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [0], scatter_dims_to_operand_dims = [0]>, indices_are_sorted = true, unique_indices = true} : (tensor<8xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<8xi32>
    %next = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %next, %p2 : tensor<i32>, tensor<8xi32>
  }
  return %0#1 : tensor<8xi32>
}
"""


def test_updates_after_the_last_read_of_a_carried_value_write_in_place(context):
    """Both scatters write the carried buffer in place: its value is read last by the slices
    before them. Its init counts as read where the loop starts, and the body's result,
    written after the first scatter, is a later value of the same buffer, not a live one."""
    module = load(SWAPS_INTO_CARRIED, context)
    PipelineRunner(module).run(named_pipeline("cpu"))
    a = analyze(module)
    carried = buffer_of(a, "while.arg1")
    assert [v.name for v in carried.values if v.name.startswith("scatter")] == ["scatter", "scatter.1"]
    pivots = np.array([3, 3, 7, 4, 4, 5, 7, 7], dtype=np.int32)
    [got] = Client().compile(SWAPS_INTO_CARRIED).execute_numpy([pivots])
    [expected] = reference_outputs(load(SWAPS_INTO_CARRIED, context), [pivots])
    np.testing.assert_array_equal(got, expected)


def test_carried_value_copies_stay_last_in_a_while_body(context):
    """The emitter runs a body's carried-value copies after all its other thunks; the
    schedule keeps them there so that buffer assignment sees the order that runs."""
    module = load(SORT_INTO_CARRIED, context)
    PipelineRunner(module).run(named_pipeline("cpu"))
    body = ops_named(module, "xhlo.while")[0].regions[1].blocks[0]
    names = [op.operation.name for op in body.operations]
    copies = [k for k, name in enumerate(names) if name == "xhlo.copy"]
    assert copies and copies == list(range(len(names) - 1 - len(copies), len(names) - 1))


def test_schedules_respect_dependencies_on_samples(context):
    for name in SAMPLE_FILES:
        module = frontdoor.import_file(os.path.join(JAX_PROGRAMS, name), context).module
        PipelineRunner(module).run(named_pipeline("simplification"))
        SchedulingPass().run(module)
        module.operation.verify()


# ----- results unchanged on the JAX samples ----------------------------------------------


@pytest.mark.parametrize("name", SAMPLE_FILES)
def test_scheduling_and_buffer_assignment_keep_sample_results(name, context):
    module = frontdoor.import_file(os.path.join(JAX_PROGRAMS, name), context).module
    arguments = random_arguments(module, 11)
    PipelineRunner(module).run(named_pipeline("simplification"))
    before = reference_outputs(module, arguments)
    PipelineRunner(module).run(Pipeline("scheduling").add(SchedulingPass()).add(BufferAssignmentPass()))
    assert "xhlo.schedule" in module.operation.attributes
    assert "xhlo.buffer_assignment" in module.operation.attributes
    after = reference_outputs(module, arguments)
    for a, b in zip(after, before):
        np.testing.assert_array_equal(a, b)
    summary = memory_summary(module)
    assert summary["total"] == summary["temp"] + summary["parameter"] + summary["live_out"] + summary["constant"]
    assert summary["temp"] >= summary["peak"]


# Parameter bytes do not depend on fusion: after simplification they are XLA:CPU's already
# (XLA's figure read from its own dump of the same program).
@pytest.mark.jax
@pytest.mark.parametrize("name,parameter_bytes", [("mlp_softmax_small", 46632), ("scan", 98816), ("mlp", 13643776)])
def test_parameter_bytes_match_xla(name, parameter_bytes, context, xla_figures):
    assert xla_figures[name]["parameter_bytes"] == parameter_bytes
    module = frontdoor.import_file(os.path.join(JAX_PROGRAMS, "programs", f"{name}.stablehlo.mlir"), context).module
    PipelineRunner(module).run(named_pipeline("simplification"))
    assert memory_summary(module)["parameter"] == parameter_bytes


# max - min along a dimension (`jnp.ptp`): the minimum is one kernel, the maximum and the
# subtraction another, which must not take the minimum's buffer for its result: its kernel
# keeps the maximum there while it reduces (the minimum was read back as the maximum: zeros)
RANGE = """
func.func @main(%z: tensor<2x3x4xf32>) -> tensor<3x4xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %inf = stablehlo.constant dense<0x7F800000> : tensor<f32>
  %high = stablehlo.reduce(%z init: %ninf) applies stablehlo.maximum across dimensions = [0] : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<3x4xf32>
  %low = stablehlo.reduce(%z init: %inf) applies stablehlo.minimum across dimensions = [0] : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<3x4xf32>
  %range = stablehlo.subtract %high, %low : tensor<3x4xf32>
  return %range : tensor<3x4xf32>
}
"""
RANGE_OF_A_DOT = """
func.func @main(%z: tensor<2x4x4xf32>, %y: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %inf = stablehlo.constant dense<0x7F800000> : tensor<f32>
  %low = stablehlo.reduce(%z init: %inf) applies stablehlo.minimum across dimensions = [0] : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  %m = stablehlo.dot %y, %y : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %high = stablehlo.reduce(%z init: %ninf) applies stablehlo.maximum across dimensions = [0] : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  %range = stablehlo.subtract %high, %low : tensor<4x4xf32>
  %r = stablehlo.subtract %range, %m : tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}
"""


@pytest.mark.parametrize("text", [RANGE, RANGE_OF_A_DOT], ids=["range", "range_minus_dot"])
def test_a_fusion_holding_a_reduction_gives_no_operand_its_buffer(text, context):
    module = load(text, context)
    arguments = random_arguments(module, 5)
    got = Client().compile(text).execute_numpy(arguments)
    np.testing.assert_allclose(got[0], reference_outputs(load(text, context), arguments)[0], rtol=1e-5, atol=1e-5)


def test_check_evaluates_a_stablehlo_dot(tmp_path):
    """`mlirxla-run --check` on a module holding stablehlo.dot: the oracle hands the
    interpreter its dot_general (on stablehlo.dot the interpreter aborts the process)."""
    path = tmp_path / "range_minus_dot.mlir"
    path.write_text(RANGE_OF_A_DOT)
    done = subprocess.run([sys.executable, "-m", "mlirxla.tools.run", str(path), "--check"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 output(s) match" in done.stdout


def test_a_fusion_materializing_values_gives_no_operand_its_buffer(context):
    """`jax.scipy.special.spence`'s piecewise polynomial, run op by op (as jax's eager mode
    compiles it): the polynomial's fusion broadcasts, transposes and slices its coefficients,
    values its kernel materializes, and it read an operand from the buffer it was writing
    (fixed from jax's `lax_scipy_test.py` test_spence1)."""
    text = open(os.path.join(REPOSITORY, "test", "data", "spence_piecewise.stablehlo.mlir")).read()
    x = np.array([0.3, 1.2, 2.5, 4.0, 0.9, 1.9], np.float32)
    arguments = [x, np.zeros((3, 6), bool), np.float32(np.nan), np.int32(0), np.float32(1.6449341)]
    got = Client().compile(text).execute_numpy(arguments)[0]
    np.testing.assert_allclose(got, reference_outputs(load(text, context), arguments)[0], rtol=1e-6)
