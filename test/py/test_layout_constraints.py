"""Layout constraints (`frontdoor/layout_constraints.py`): one asking for the row-major layout
every mlirxla buffer has is the value it constrains; one asking for another layout is refused
with its location and the layout."""

import numpy as np
import pytest

from mlirxla.errors import MlirxlaError
from mlirxla.runtime.client import Client

CONSTRAINED = """func.func @main(%x: tensor<2x16x8xf32>) -> tensor<8x16x2xf32> {{
  %t = stablehlo.transpose %x, dims = [2, 1, 0] : (tensor<2x16x8xf32>) -> tensor<8x16x2xf32>
  %c = stablehlo.custom_call @LayoutConstraint(%t) {{backend_config = "", operand_layouts = [dense<[0, 1, 2]> : tensor<3xindex>], result_layouts = [dense<{layout}> : tensor<3xindex>]}} : (tensor<8x16x2xf32>) -> tensor<8x16x2xf32>
  %r = stablehlo.negate %c : tensor<8x16x2xf32>
  return %r : tensor<8x16x2xf32>
}}"""


def test_row_major_constraint_is_the_value():
    x = np.arange(256, dtype=np.float32).reshape(2, 16, 8)
    (got,) = Client().compile(CONSTRAINED.format(layout="[2, 1, 0]")).execute_numpy([x])
    np.testing.assert_array_equal(got, -x.transpose(2, 1, 0))


def test_other_layouts_are_refused_where_they_are_asked_for():
    with pytest.raises(MlirxlaError, match=r"<text>:3:8: custom_call @LayoutConstraint: layout minor-to-major "
                                           r"\[0, 1, 2\] \(mlirxla buffers are row-major, \[2, 1, 0\]\)"):
        Client().compile(CONSTRAINED.format(layout="[0, 1, 2]"))
