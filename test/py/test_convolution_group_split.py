"""Grouped convolutions split into one convolution per group (`transforms/convolution_group_split.py`):
jax's per-example convolution (feature groups), its per-example weight gradient (feature
groups in the gradient's layout) and batch groups give the reference interpreter's values,
each group's convolution taking a strategy of its own instead of the grouped loop nest; a
depthwise convolution keeps its loop nest."""

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.backends.cpu.compiler import compile_module
from mlirxla.context import new_context
from mlirxla.runtime.executable import Executable

from .conftest import random_arguments, reference_outputs


def convolution(numbers: str, lhs: str, rhs: str, out: str, window: str, features: int = 1, batches: int = 1) -> str:
    return f"""func.func @main(%x: tensor<{lhs}xf32>, %k: tensor<{rhs}xf32>) -> tensor<{out}xf32> {{
  %0 = stablehlo.convolution(%x, %k) dim_numbers = {numbers}, window = {{{window}}} {{batch_group_count = {batches} : i64, feature_group_count = {features} : i64}} : (tensor<{lhs}xf32>, tensor<{rhs}xf32>) -> tensor<{out}xf32>
  return %0 : tensor<{out}xf32>
}}"""


NHWC = "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]"
GROUPED = {
    # vmap of a 3x3 convolution over 4 examples of 8 channels, folded into 4 groups
    "per-example convolution": (convolution(NHWC, "1x12x12x32", "3x3x8x32", "1x12x12x32", "pad = [[1, 1], [1, 1]]", features=4), 4),
    # its weight gradient: the examples are the input's features, the channels its batch
    "per-example weight gradient": (convolution("[f, 0, 1, b]x[i, 0, 1, o]->[0, 1, b, f]", "4x12x12x8", "1x10x10x32", "3x3x8x32", "", features=4), 4),
    "NCHW feature groups with a stride": (convolution("[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]", "2x16x9x11", "32x8x3x2", "2x32x4x10",
                                                      "stride = [2, 1], pad = [[0, 0], [0, 0]]", features=2), 2),
    "batch groups": (convolution(NHWC, "2x6x6x8", "3x3x8x16", "1x4x4x16", "", batches=2), 2),
}


def compiled(text: str):
    program = compile_module(frontdoor.import_text(text, "groups", new_context()).module)
    return Executable.of(program), program.decisions


@pytest.mark.parametrize("name", GROUPED)
def test_grouped_convolutions_split_into_their_groups_match_the_reference(name):
    text, groups = GROUPED[name]
    executable, decisions = compiled(text)
    assert sum("convolution strategy" in decision for decision in decisions) == groups, decisions
    module = frontdoor.import_text(text, "groups", new_context()).module
    arguments = random_arguments(module, seed=5)
    np.testing.assert_allclose(executable.execute(arguments)[0], reference_outputs(module, arguments)[0], rtol=1e-5, atol=1e-4)


def test_a_depthwise_convolution_keeps_its_loop_nest():
    """One input feature per group, a 3x3 window: 9 multiply-adds deep, below the groups the
    split takes; one grouped convolution, the reference's values."""
    text = convolution(NHWC, "1x12x12x16", "3x3x1x16", "1x12x12x16", "pad = [[1, 1], [1, 1]]", features=16)
    executable, decisions = compiled(text)
    assert [decision.split(";")[0] for decision in decisions if "convolution strategy" in decision] == ["convolution: convolution strategy loop_nest"]
    module = frontdoor.import_text(text, "groups", new_context()).module
    arguments = random_arguments(module, seed=6)
    np.testing.assert_allclose(executable.execute(arguments)[0], reference_outputs(module, arguments)[0], rtol=1e-5, atol=1e-5)
