"""Layout assignment, copy removal and copy insertion leave results unchanged on the JAX
samples (checked against the reference interpreter, which ignores layouts and treats copies as
the identity), give every tensor value a layout, and explain their decisions."""

import os

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.mlir import ir
from mlirxla.pipelines import named_pipeline
from mlirxla.pipelines.pipeline import Pipeline
from mlirxla.pipelines.runner import PipelineRunner
from mlirxla.runtime.client import Client
from mlirxla.transforms.copy_insertion import CopyInsertionPass
from mlirxla.transforms.layout_assignment import LayoutAssignmentPass, layout_of

from .conftest import JAX_PROGRAMS, PASS_SAMPLES, random_arguments, reference_outputs

NAMES = PASS_SAMPLES



def all_ops(module) -> list:
    found = []

    def visit(op):
        found.append(op.operation)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def check_every_value_has_layout(module) -> None:
    for op in all_ops(module):
        name = op.name
        if name == "func.func":
            continue
        if not name.startswith("xhlo.") or not any(isinstance(r.type, ir.RankedTensorType) for r in op.results):
            continue
        assert "result_layouts" in op.attributes, f"{name} has no result_layouts"
        for r in op.results:
            if isinstance(r.type, ir.RankedTensorType):
                layout = layout_of(r)
                assert sorted(layout) == list(range(ir.RankedTensorType(r.type).rank))
    main = [f for f in all_ops(module) if f.name == "func.func" and ir.StringAttr(f.attributes["sym_name"]).value == "main"][0]
    arg_attrs = ir.ArrayAttr(main.attributes["arg_attrs"])
    for i, arg in enumerate(main.regions[0].blocks[0].arguments):
        if isinstance(arg.type, ir.RankedTensorType):
            assert "xhlo.layout" in ir.DictAttr(arg_attrs[i])


@pytest.mark.parametrize("name", NAMES)
def test_layouts_and_copies_keep_results(name, context):
    module = frontdoor.import_file(os.path.join(JAX_PROGRAMS, name), context).module
    arguments = random_arguments(module, 11)
    before = reference_outputs(module, arguments)
    runner = PipelineRunner(module)
    runner.run(named_pipeline("simplification"))
    runner.run(Pipeline("layouts").add(LayoutAssignmentPass()).add("xhlo-copy-removal").add(CopyInsertionPass()))
    with context:
        check_every_value_has_layout(module)
        report = runner.reports["xhlo-layout-assignment"].dump_files()["layout-assignment.txt"]
        assert "entry computation layout" in report
        assert all(" by " in line for line in report.splitlines())
        assert "copy-insertion.txt" in runner.reports["xhlo-copy-insertion"].dump_files()
    after = reference_outputs(module, arguments)
    assert len(after) == len(before)
    for a, b in zip(after, before):
        np.testing.assert_array_equal(a, b)


def test_while_sample_gets_loop_copies(context):
    module = frontdoor.import_file(os.path.join(JAX_PROGRAMS, "02_scan_while_cond_gelu.stablehlo.mlir"), context).module
    runner = PipelineRunner(module)
    runner.run(Pipeline("copies").add(LayoutAssignmentPass()).add(CopyInsertionPass()))
    text = runner.reports["xhlo-copy-insertion"].dump_files()["copy-insertion.txt"]
    assert "while init is a constant" in text
    assert "while init is a parameter" not in text  # xs is passed through unchanged: no copy


# jax's tests testIssue649 and test_while_constification_correctness_manually: a while body
# returning a constant gave the loop the constant's buffer as a carried buffer (the result
# stayed the init, and a condition reading it never turned false)
BODY_RETURNS_CONSTANTS = """
func.func @main() -> (tensor<i32>, tensor<f32>, tensor<f32>) {
  %a = stablehlo.constant dense<33> : tensor<i32>
  %i = stablehlo.constant dense<0.0> : tensor<f32>
  %x = stablehlo.constant dense<5.0> : tensor<f32>
  %r:3 = stablehlo.while(%ia = %a, %ii = %i, %ix = %x) : tensor<i32>, tensor<f32>, tensor<f32>
  cond {
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %p = stablehlo.compare EQ, %ii, %zero, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %seven = stablehlo.constant dense<7> : tensor<i32>
    %one = stablehlo.constant dense<1.0> : tensor<f32>
    %twice = stablehlo.add %ix, %ix : tensor<f32>
    stablehlo.return %seven, %one, %twice : tensor<i32>, tensor<f32>, tensor<f32>
  }
  return %r#0, %r#1, %r#2 : tensor<i32>, tensor<f32>, tensor<f32>
}
"""


def test_a_while_body_returning_a_constant_gets_a_copy(context):
    module = frontdoor.import_text(BODY_RETURNS_CONSTANTS, "test", context).module
    runner = PipelineRunner(module)
    runner.run(Pipeline("copies").add(LayoutAssignmentPass()).add(CopyInsertionPass()))
    assert runner.reports["xhlo-copy-insertion"].dump_files()["copy-insertion.txt"].count("while body returns a constant") == 2
    got = Client().compile(BODY_RETURNS_CONSTANTS).execute_numpy([])
    assert [v.item() for v in got] == [7, 1.0, 10.0]


# jax's checkpointed while loop (`jax.checkpoint(partial(lax.while_loop, ...))` under
# jax.linearize): the parameters reach the loop through an optimization barrier, whose results
# are their buffers; without a copy the loop wrote the caller's arrays (the plugin then
# reported them donated and jax deleted them)
LOOP_THROUGH_A_BARRIER = """
func.func @main(%x: tensor<3x3xf32>, %t: tensor<3x3xf32>) -> tensor<3x3xf32> {
  %b:2 = stablehlo.optimization_barrier %x, %t : tensor<3x3xf32>, tensor<3x3xf32>
  %r:2 = stablehlo.while(%ix = %b#0, %it = %b#1) : tensor<3x3xf32>, tensor<3x3xf32>
  cond {
    %corner = stablehlo.slice %ix [0:1, 2:3] : (tensor<3x3xf32>) -> tensor<1x1xf32>
    %c = stablehlo.reshape %corner : (tensor<1x1xf32>) -> tensor<f32>
    %eight = stablehlo.constant dense<8.0> : tensor<f32>
    %p = stablehlo.compare LE, %c, %eight, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %square = stablehlo.multiply %ix, %ix : tensor<3x3xf32>
    %a = stablehlo.multiply %it, %ix : tensor<3x3xf32>
    %twice = stablehlo.add %a, %a : tensor<3x3xf32>
    stablehlo.return %square, %twice : tensor<3x3xf32>, tensor<3x3xf32>
  }
  return %r#1 : tensor<3x3xf32>
}
"""


def test_parameters_reaching_a_loop_through_a_barrier_are_copied(context):
    module = frontdoor.import_text(LOOP_THROUGH_A_BARRIER, "test", context).module
    runner = PipelineRunner(module)
    runner.run(Pipeline("copies").add(LayoutAssignmentPass()).add(CopyInsertionPass()))
    report = runner.reports["xhlo-copy-insertion"].dump_files()["copy-insertion.txt"]
    assert report.count("while init is a parameter") == 2, report
    x = np.arange(9, dtype=np.float32).reshape(3, 3)
    arguments = [x, x.copy()]
    executable = Client().compile(LOOP_THROUGH_A_BARRIER)
    assert not executable.executable.written_parameters
    got = executable.execute_numpy(arguments)
    np.testing.assert_array_equal(arguments[0], np.arange(9, dtype=np.float32).reshape(3, 3))
    np.testing.assert_array_equal(got[0], reference_outputs(frontdoor.import_text(LOOP_THROUGH_A_BARRIER, "test", context).module, arguments)[0])


# jax's checkpointed scan (api_test's test_remat_checkpoint_dots_inside_scan, second-order
# VJP): the body reads its carried value through an optimization barrier, and output fusion
# moved a dot reading it (through the barrier) after the op writing the next iteration's value
# into the carried buffer; the dot read the new value (a gradient 0.7% off)
READ_THROUGH_A_BARRIER_AFTER_THE_UPDATE = """
func.func @main(%w: tensor<5x5xf32>, %x: tensor<5xf32>) -> (tensor<5xf32>, tensor<5xf32>) {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %acc0 = stablehlo.constant dense<0.0> : tensor<5xf32>
  %r:3 = stablehlo.while(%i = %zero, %p = %x, %acc = %acc0) : tensor<i32>, tensor<5xf32>, tensor<5xf32>
  cond {
    %three = stablehlo.constant dense<3> : tensor<i32>
    %c = stablehlo.compare LT, %i, %three, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  } do {
    %b:2 = stablehlo.optimization_barrier %p, %w : tensor<5xf32>, tensor<5x5xf32>
    %next = stablehlo.sine %b#0 : tensor<5xf32>
    %d = stablehlo.dot_general %b#1, %b#0, contracting_dims = [1] x [0] : (tensor<5x5xf32>, tensor<5xf32>) -> tensor<5xf32>
    %e = stablehlo.dot_general %b#1, %next, contracting_dims = [1] x [0] : (tensor<5x5xf32>, tensor<5xf32>) -> tensor<5xf32>
    %ee = stablehlo.multiply %e, %e : tensor<5xf32>
    %s = stablehlo.add %ee, %acc : tensor<5xf32>
    %sum = stablehlo.add %d, %s : tensor<5xf32>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %j = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %j, %next, %sum : tensor<i32>, tensor<5xf32>, tensor<5xf32>
  }
  return %r#1, %r#2 : tensor<5xf32>, tensor<5xf32>
}
"""


def test_a_carried_value_read_through_a_barrier_after_its_update_gets_a_copy(context):
    rng = np.random.default_rng(0)
    arguments = [rng.standard_normal((5, 5)).astype(np.float32), rng.standard_normal(5).astype(np.float32)]
    got = Client().compile(READ_THROUGH_A_BARRIER_AFTER_THE_UPDATE).execute_numpy(arguments)
    expected = reference_outputs(frontdoor.import_text(READ_THROUGH_A_BARRIER_AFTER_THE_UPDATE, "test", context).module, arguments)
    for value, want in zip(got, expected):
        np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-6)


def row_loop(body: str) -> str:
    """A loop over the 8 rows of an 8x16 array: `body` computes %u, the next array, from the
    carried one %a, the row index %i and a zero %z."""
    return """
func.func @main(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %zero, %a = %x) : tensor<i32>, tensor<8x16xf32>
  cond {
    %n = stablehlo.constant dense<8> : tensor<i32>
    %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %z = stablehlo.constant dense<0> : tensor<i32>
    """ + body + """
    %one = stablehlo.constant dense<1> : tensor<i32>
    %j = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %j, %u : tensor<i32>, tensor<8x16xf32>
  }
  return %r#1 : tensor<8x16xf32>
}
"""


def copies_of_a_checked_loop(text: str, context) -> str:
    """The copy insertion report of `text` through the cpu pipeline, once its results were
    checked against the reference interpreter's."""
    module = frontdoor.import_text(text, "test", context).module
    runner = PipelineRunner(module)
    runner.run(named_pipeline("cpu"))
    x = np.random.default_rng(3).standard_normal((8, 16)).astype(np.float32)
    [got] = Client().compile(text).execute_numpy([x])
    [expected] = reference_outputs(frontdoor.import_text(text, "test", context).module, [x])
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    return runner.reports["xhlo-copy-insertion"].dump_files()["copy-insertion.txt"]


# `x.at[i].set(f(x[i]))` in a fori_loop: the fusion slicing the row and updating it reads
# and writes the same window of the carried array
ROW_UPDATE = """%start = stablehlo.constant dense<ROW_OFFSET> : tensor<i32>
    %row_start = stablehlo.add %i, %start : tensor<i32>
    %row = stablehlo.dynamic_slice %a, %row_start, %z, sizes = [ROWS, 16] : (tensor<8x16xf32>, tensor<i32>, tensor<i32>) -> tensor<ROWSx16xf32>
    UPDATE
    %u = stablehlo.dynamic_update_slice %a, %new, %i, %z : (tensor<8x16xf32>, tensor<ROWSx16xf32>, tensor<i32>, tensor<i32>) -> tensor<8x16xf32>"""

ROW_UPDATES = {
    "sine": ("%new = stablehlo.sine %row : tensor<ROWSx16xf32>", 1, 0),
    "reversed": ("%new = stablehlo.reverse %row, dims = [1] : tensor<ROWSx16xf32>", 1, 0),
    "rows_reversed": ("%new = stablehlo.reverse %row, dims = [0] : tensor<ROWSx16xf32>", 2, 0),
    "minus_max": ("""%init = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %max = stablehlo.reduce(%row init: %init) applies stablehlo.maximum across dimensions = [1] : (tensor<ROWSx16xf32>, tensor<f32>) -> tensor<ROWSxf32>
    %wide = stablehlo.broadcast_in_dim %max, dims = [0] : (tensor<ROWSxf32>) -> tensor<ROWSx16xf32>
    %new = stablehlo.subtract %row, %wide : tensor<ROWSx16xf32>""", 1, 0),
    "next_rows": ("%new = stablehlo.sine %row : tensor<ROWSx16xf32>", 2, 1),
}


@pytest.mark.parametrize("update", sorted(ROW_UPDATES))
def test_a_fused_row_update_reading_its_own_window_writes_in_place(update, context):
    """A dynamic slice at the update's indices and of its shape leaves the fused update in
    place (XLA's rule); bufferization keeps the results right where the update reads the
    window other than elementwise, and a slice at other indices still gets its copy."""
    body, rows, offset = ROW_UPDATES[update]
    text = row_loop(ROW_UPDATE.replace("UPDATE", body).replace("ROWS", str(rows)).replace("ROW_OFFSET", str(offset)))
    report = copies_of_a_checked_loop(text, context)
    assert ("in-place update of a value that is still live" in report) == (offset != 0), report


# jax's `x.at[i].set(jnp.sin(x[i]))` in a fori_loop: a scatter of one row, its update read
# from the carried array by a slice that runs before it
ROW_SCATTER = """%row = stablehlo.dynamic_slice %a, %i, %z, sizes = [1, 16] : (tensor<8x16xf32>, tensor<i32>, tensor<i32>) -> tensor<1x16xf32>
    %flat = stablehlo.reshape %row : (tensor<1x16xf32>) -> tensor<16xf32>
    %new = stablehlo.sine %flat : tensor<16xf32>
    %index = stablehlo.reshape %i : (tensor<i32>) -> tensor<1xi32>
    %u = "stablehlo.scatter"(%a, %index, %new) <{indices_are_sorted = true, unique_indices = true,
        scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [0], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0]>}> ({
      ^bb0(%old: tensor<f32>, %update: tensor<f32>):
        stablehlo.return %update : tensor<f32>
    }) : (tensor<8x16xf32>, tensor<1xi32>, tensor<16xf32>) -> tensor<8x16xf32>"""


def test_a_loop_scattering_into_its_carried_array_writes_it_in_place(context):
    """The scatter is the last reader of the carried array: the body's result needs no copy
    (it was one, and the loop copied it back: 13x XLA:CPU at 512 rows of 256)."""
    report = copies_of_a_checked_loop(row_loop(ROW_SCATTER), context)
    assert "xhlo.scatter -> xhlo.return" not in report, report


# jax's binary search (`searchsorted`, `interp`, `random.gamma`'s rejection loop): each
# step moves both carried bounds, each select reading both
BISECTION = """
func.func @main(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %one = stablehlo.constant dense<1.0> : tensor<8x16xf32>
  %low = stablehlo.subtract %x, %one : tensor<8x16xf32>
  %high = stablehlo.add %x, %one : tensor<8x16xf32>
  %r:3 = stablehlo.while(%i = %zero, %lo = %low, %hi = %high) : tensor<i32>, tensor<8x16xf32>, tensor<8x16xf32>
  cond {
    %n = stablehlo.constant dense<12> : tensor<i32>
    %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %half = stablehlo.constant dense<0.5> : tensor<8x16xf32>
    %sum = stablehlo.add %lo, %hi : tensor<8x16xf32>
    %mid = stablehlo.multiply %sum, %half : tensor<8x16xf32>
    %s = stablehlo.sine %mid : tensor<8x16xf32>
    %z = stablehlo.constant dense<0.0> : tensor<8x16xf32>
    %c = stablehlo.compare GT, %s, %z, FLOAT : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xi1>
    %lo2 = stablehlo.select %c, %lo, %mid : tensor<8x16xi1>, tensor<8x16xf32>
    %hi2 = stablehlo.select %c, %mid, %hi : tensor<8x16xi1>, tensor<8x16xf32>
    %step = stablehlo.constant dense<1> : tensor<i32>
    %j = stablehlo.add %i, %step : tensor<i32>
    stablehlo.return %j, %lo2, %hi2 : tensor<i32>, tensor<8x16xf32>, tensor<8x16xf32>
  }
  %width = stablehlo.subtract %r#2, %r#1 : tensor<8x16xf32>
  %out = stablehlo.add %width, %r#1 : tensor<8x16xf32>
  return %out : tensor<8x16xf32>
}
"""


def test_a_loop_moving_two_bounds_updates_both_in_place(context):
    """The step's fusion computes both bounds from both: it writes them over the carried
    bounds (one loop nest reading both before writing either), where each was copied back
    every step (interp 1.5x, histogram 2.5x XLA:CPU)."""
    report = copies_of_a_checked_loop(BISECTION, context)
    assert "while body result would overwrite" not in report, report


# jax's searchsorted: the midpoints index a sorted table, and the compare of what they
# gather picks which bound moves
SEARCH = """
func.func @main(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %table = stablehlo.constant dense<[-3.0, -2.0, -1.5, -1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0]> : tensor<16xf32>
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %low = stablehlo.constant dense<0> : tensor<128xi32>
  %high = stablehlo.constant dense<16> : tensor<128xi32>
  %flat = stablehlo.reshape %x : (tensor<8x16xf32>) -> tensor<128xf32>
  %r:3 = stablehlo.while(%i = %zero, %lo = %low, %hi = %high) : tensor<i32>, tensor<128xi32>, tensor<128xi32>
  cond {
    %n = stablehlo.constant dense<5> : tensor<i32>
    %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<128xi32>
    %sum = stablehlo.add %lo, %hi : tensor<128xi32>
    %mid = stablehlo.shift_right_logical %sum, %one : tensor<128xi32>
    %index = stablehlo.reshape %mid : (tensor<128xi32>) -> tensor<128x1xi32>
    %gathered = "stablehlo.gather"(%table, %index) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1>}> : (tensor<16xf32>, tensor<128x1xi32>) -> tensor<128xf32>
    %c = stablehlo.compare LE, %gathered, %flat, FLOAT : (tensor<128xf32>, tensor<128xf32>) -> tensor<128xi1>
    %lo2 = stablehlo.select %c, %mid, %lo : tensor<128xi1>, tensor<128xi32>
    %hi2 = stablehlo.select %c, %hi, %mid : tensor<128xi1>, tensor<128xi32>
    %step = stablehlo.constant dense<1> : tensor<i32>
    %j = stablehlo.add %i, %step : tensor<i32>
    stablehlo.return %j, %lo2, %hi2 : tensor<i32>, tensor<128xi32>, tensor<128xi32>
  }
  %found = stablehlo.convert %r#1 : (tensor<128xi32>) -> tensor<128xf32>
  %out = stablehlo.reshape %found : (tensor<128xf32>) -> tensor<8x16xf32>
  return %out : tensor<8x16xf32>
}
"""


def test_a_search_step_is_one_kernel_updating_both_bounds_in_place(context):
    """The compare of the gathered midpoints joins the fusion of both selects (priority
    fusion kept it apart: it would have been duplicated into each), and the step writes both
    bounds over the carried ones: a gather through the bounds' midpoints reads each bound
    only where it is written. Before, two kernels a step, and the loop copied both bounds
    back (histogram 2x XLA:CPU)."""
    report = copies_of_a_checked_loop(SEARCH, context)
    assert "while body result would overwrite" not in report, report
    module = frontdoor.import_text(SEARCH, "test", context).module
    PipelineRunner(module).run(named_pipeline("cpu"))
    loop = next(op for op in all_ops(module) if op.name == "xhlo.while")
    body = loop.regions[1].blocks[0]
    kernels = [op for op in body.operations if op.operation.name == "xhlo.fusion"
               and "gather" in str(op.operation)]
    assert len(kernels) == 1 and len(kernels[0].results) == 2, [op.operation.name for op in body.operations]
