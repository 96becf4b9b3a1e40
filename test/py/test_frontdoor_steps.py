"""The front door runs a step that looks for ops of a few names only where the module holds
one (`frontdoor.OpNames`, one walk for all of them, read again after a step that ran): the
module it makes is the one every step run on every module makes, and a step's ops made by an
earlier step (a composite's call, inlined next) are seen."""

import os

import numpy as np
import pytest

from mlirxla import frontdoor, printing
from mlirxla.mlir import ir
from mlirxla.runtime.client import Client

from .conftest import JAX_PROGRAMS

COMPOSITE = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.composite "my.double" %x {decomposition = @double} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func private @double(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %x, %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""

PROGRAMS = ["01_mlp_softmax.stablehlo.mlir", "02_scan_while_cond_gelu.stablehlo.mlir", "03_sharded_namedsharding.stablehlo.mlir",
            "04_sharded_gspmd_mhlo_sharding.stablehlo.mlir", "05_shard_map_psum.stablehlo.mlir", "programs/transformer.stablehlo.mlir"]


def every_step(monkeypatch):
    """Every step that looks for ops runs whatever the module holds (the quantized-types step
    still only on quantized types: StableHLO's passes refuse a module without them)."""
    monkeypatch.setattr(frontdoor, "STEPS", tuple((name, step, needs if step is frontdoor.dequantize else None)
                                                  for name, step, needs in frontdoor.STEPS))


def imported_text(text: str, context) -> str:
    return printing.module_text(frontdoor.import_text(text, "steps.mlir", context).module)


def test_a_composite_becomes_a_call_that_is_inlined(context):
    """The call the composite step makes is found by the inlining step: the op names are read
    again after a step ran (read once, the module would seem to hold no call)."""
    module = frontdoor.import_text(COMPOSITE, "composite.mlir", context).module
    names = [op.operation.name for op in module.body.operations[0].regions[0].blocks[0].operations]
    assert names == ["xhlo.add", "func.return"]
    assert [op.operation.name for op in module.body.operations] == ["func.func"]


# jax serializes chlo.top_k for a plugin as a composite; this decomposition is deliberately
# not one (it returns the operand's first three elements), so that the test sees which ran.
CHLO_COMPOSITE = """func.func @main(%x: tensor<6xf32>) -> (tensor<3xf32>, tensor<3xi32>) {
  %0:2 = stablehlo.composite "chlo.top_k" %x {composite_attributes = {k = 3 : i64}, decomposition = @not_top_k} : (tensor<6xf32>) -> (tensor<3xf32>, tensor<3xi32>)
  return %0#0, %0#1 : tensor<3xf32>, tensor<3xi32>
}
func.func private @not_top_k(%x: tensor<6xf32>) -> (tensor<3xf32>, tensor<3xi32>) {
  %0 = stablehlo.slice %x [0:3] : (tensor<6xf32>) -> tensor<3xf32>
  %1 = stablehlo.iota dim = 0 : tensor<3xi32>
  return %0, %1 : tensor<3xf32>, tensor<3xi32>
}
"""


def test_a_composite_of_a_chlo_op_is_composed_by_its_rule():
    """A composite named after a chlo op with a rule is that op again (XLA's
    chlo-recompose-ops), its composite attributes its attributes: the plugin computes it as
    the module's text would have (jax's erf and sinh differed), not by jaxlib's decomposition."""
    values = np.array([3, 9, 1, 7, 5, 8], np.float32)
    top, indices = Client().compile(CHLO_COMPOSITE).execute_numpy([values])
    np.testing.assert_array_equal(top, [9, 8, 7])
    np.testing.assert_array_equal(indices, [1, 5, 3])


@pytest.mark.parametrize("name", PROGRAMS)
def test_skipped_steps_change_nothing(name, context, monkeypatch):
    with open(os.path.join(JAX_PROGRAMS, name)) as stream:
        text = stream.read()
    skipping = imported_text(text, context)
    every_step(monkeypatch)
    assert imported_text(text, context) == skipping


def test_a_composite_module_imports_as_with_every_step(context, monkeypatch):
    skipping = imported_text(COMPOSITE, context)
    every_step(monkeypatch)
    assert imported_text(COMPOSITE, context) == skipping


def test_op_names_are_read_once_until_a_step_ran(context):
    with context:
        module = ir.Module.parse(COMPOSITE)
    ops = frontdoor.OpNames(module)
    assert {"stablehlo.composite", "stablehlo.add", "func.func", "func.return"} <= ops.held()
    with context, ir.Location.unknown():
        frontdoor.composites_to_calls(module)
    assert "func.call" not in ops.held()  # read before the step: kept until told
    ops.changed()
    assert "func.call" in ops.held() and "stablehlo.composite" not in ops.held()


# a gather and a scatter whose index vector is the indices' dimension 0: StableHLO prints no
# `index_vector_dim` then (jnp.median's gathers of one row of a sorted array look so)
ROW_BY_INDEX_VECTOR = """
func.func @main(%rows: tensor<8x16xf32>, %at: tensor<1xi32>, %row: tensor<16xf32>) -> (tensor<16xf32>, tensor<8x16xf32>) {
  %0 = "stablehlo.gather"(%rows, %at) <{dimension_numbers = #stablehlo.gather<offset_dims = [0], collapsed_slice_dims = [0], start_index_map = [0]>, indices_are_sorted = false, slice_sizes = array<i64: 1, 16>}> : (tensor<8x16xf32>, tensor<1xi32>) -> tensor<16xf32>
  %1 = "stablehlo.scatter"(%rows, %at, %row) <{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [0], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0]>}> ({
  ^bb0(%old: tensor<f32>, %new: tensor<f32>):
    %2 = stablehlo.add %old, %new : tensor<f32>
    stablehlo.return %2 : tensor<f32>
  }) : (tensor<8x16xf32>, tensor<1xi32>, tensor<16xf32>) -> tensor<8x16xf32>
  return %0, %1 : tensor<16xf32>, tensor<8x16xf32>
}
"""


def test_an_index_vector_dimension_left_unprinted_is_written_as_zero(context):
    assert "index_vector_dim" not in ROW_BY_INDEX_VECTOR
    assert imported_text(ROW_BY_INDEX_VECTOR, context).count("index_vector_dim = 0 : i64") == 2
    rows = np.arange(128, dtype=np.float32).reshape(8, 16)
    row = np.full(16, 0.5, np.float32)
    gathered, scattered = Client().compile(ROW_BY_INDEX_VECTOR).execute_numpy([rows, np.array([5], np.int32), row])
    np.testing.assert_array_equal(gathered, rows[5])
    expected = rows.copy()
    expected[5] += row
    np.testing.assert_array_equal(scattered, expected)
