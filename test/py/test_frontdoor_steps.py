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
