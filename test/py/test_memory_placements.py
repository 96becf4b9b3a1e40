"""Memory kinds (`frontdoor/memory_placements.py`, `ExecutablePlan.output_memory_kinds`):
placements inside a program are the values they place, results keep the kind the entry asks
them in, and a kind the devices do not have is refused with its location."""

import numpy as np
import pytest

from mlirxla.errors import MlirxlaError
from mlirxla.runtime.client import Client, CompileOptions
from mlirxla.runtime.executable import ExecutablePlan

PLACED = """func.func @main(%x: tensor<4xf32> {mhlo.memory_kind = "pinned_host"}) -> (tensor<4xf32> {mhlo.memory_kind = "pinned_host"}, tensor<4xf32>) {
  %two = stablehlo.constant dense<2.0> : tensor<4xf32>
  %y = stablehlo.multiply %x, %two : tensor<4xf32>
  %host = stablehlo.custom_call @annotate_device_placement(%y) {has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<4xf32>) -> tensor<4xf32>
  %back = stablehlo.custom_call @MoveToDevice(%host) : (tensor<4xf32>) -> tensor<4xf32>
  %z = stablehlo.add %back, %two : tensor<4xf32>
  return %host, %z : tensor<4xf32>, tensor<4xf32>
}"""


def test_placements_are_the_values_and_results_keep_their_kinds():
    executable = Client().compile(PLACED, CompileOptions())
    x = np.arange(4, dtype=np.float32)
    host, z = executable.execute_numpy([x])
    np.testing.assert_array_equal(host, 2 * x)
    np.testing.assert_array_equal(z, 2 * x + 2)
    plan = executable.executable.plan
    assert [plan.memory_kind_of_output(i) for i in range(2)] == ["pinned_host", "device"]
    assert ExecutablePlan.from_json(plan.to_json()).output_memory_kinds == ("pinned_host", "device")


def test_results_all_in_device_memory_record_no_kinds():
    executable = Client().compile(PLACED.replace('{mhlo.memory_kind = "pinned_host"}', ""), CompileOptions())
    assert executable.executable.plan.output_memory_kinds == ()


def test_an_unknown_memory_kind_is_refused_where_it_is_placed():
    text = PLACED.replace('_xla_buffer_placement = "pinned_host"', '_xla_buffer_placement = "hbm"')
    with pytest.raises(MlirxlaError, match=r"<text>:4:11: custom_call @annotate_device_placement: memory kind 'hbm' "
                                           r"\(mlirxla devices have device, pinned_host, unpinned_host\)"):
        Client().compile(text, CompileOptions())
