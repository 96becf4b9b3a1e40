"""Convolutions whose kernel only selects become slices of the padded input
(`transforms/selecting_convolution_as_slices.py`): jax's patch extraction (a one-hot kernel
of iota and compare, grouped by input feature) in NHWC and NCHW, with strides, window
dilation and padding, over f32, bf16 and i32, and its gradient (a kernel summing the
entries that copied each input), give the reference interpreter's values with no
convolution left; a kernel that scales keeps its convolution."""

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.backends.cpu.compiler import compile_module
from mlirxla.context import new_context
from mlirxla.runtime.executable import Executable

from .conftest import random_arguments, reference_outputs


def identity(window: int, element: str) -> str:
    """Lines defining %f, the window x window identity of `element` made as jax makes it."""
    square = f"tensor<{window}x{window}xi32>"
    return f"""  %a = stablehlo.iota dim = 0 : {square}
  %b = stablehlo.iota dim = 1 : {square}
  %e = stablehlo.compare EQ, %a, %b, SIGNED : ({square}, {square}) -> tensor<{window}x{window}xi1>
  %f = stablehlo.convert %e : (tensor<{window}x{window}xi1>) -> tensor<{window}x{window}x{element}>"""


def patches(element: str, lhs: str, numbers: str, kernel_oihw: str, kernel: str, permutation: str, out: str, window: str,
            features: int, scale: str = "") -> str:
    """jax's conv_general_dilated_patches: the identity broadcast over the groups, reshaped to
    [o, 1, spatial...], transposed to the kernel layout, a convolution of `features` groups."""
    size = int(kernel_oihw.split("x")[0]) // features
    identity_type = f"tensor<{size}x{size}x{element}>"
    scaled = f"""
  %w = stablehlo.constant dense<{scale}> : {identity_type}
  %f_scaled = stablehlo.multiply %f, %w : {identity_type}""" if scale else ""
    source = "%f_scaled" if scale else "%f"
    return f"""func.func @main(%x: tensor<{lhs}x{element}>) -> tensor<{out}x{element}> {{
{identity(size, element)}{scaled}
  %h = stablehlo.broadcast_in_dim {source}, dims = [1, 2] : ({identity_type}) -> tensor<{features}x{size}x{size}x{element}>
  %r = stablehlo.reshape %h : (tensor<{features}x{size}x{size}x{element}>) -> tensor<{kernel_oihw}x{element}>
  %k = stablehlo.transpose %r, dims = {permutation} : (tensor<{kernel_oihw}x{element}>) -> tensor<{kernel}x{element}>
  %0 = stablehlo.convolution(%x, %k) dim_numbers = {numbers}, window = {{{window}}} {{batch_group_count = 1 : i64, feature_group_count = {features} : i64}} : (tensor<{lhs}x{element}>, tensor<{kernel}x{element}>) -> tensor<{out}x{element}>
  return %0 : tensor<{out}x{element}>
}}"""


NHWC = "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]"
NCHW = "[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]"
PATCHES = {
    "NHWC 3x3 SAME": ("f32", "2x9x7x4", NHWC, "36x1x3x3", "3x3x1x36", "[2, 3, 1, 0]", "2x9x7x36", "pad = [[1, 1], [1, 1]]", 4),
    "NCHW 3x2, stride, dilation": ("f32", "2x3x11x10", NCHW, "18x1x3x2", "18x1x3x2", "[0, 1, 2, 3]", "2x18x4x6",
                                   "stride = [2, 2], pad = [[1, 0], [0, 3]], rhs_dilate = [2, 1]", 3),
    "NCHW to NHWC bf16": ("bf16", "1x2x6x6", "[b, f, 0, 1]x[o, i, 0, 1]->[b, 0, 1, f]", "8x1x2x2", "8x1x2x2", "[0, 1, 2, 3]",
                          "1x5x5x8", "", 2),
    "i32": ("i32", "2x5x5x3", NHWC, "27x1x3x3", "3x3x1x27", "[2, 3, 1, 0]", "2x5x5x27", "pad = [[1, 1], [1, 1]]", 3),
}

GRADIENT = f"""func.func @main(%dy: tensor<2x9x7x36xf32>) -> tensor<2x9x7x4xf32> {{
{identity(9, "f32")}
  %r = stablehlo.reshape %f : (tensor<9x9xf32>) -> tensor<3x3x1x9xf32>
  %h = stablehlo.broadcast_in_dim %r, dims = [0, 1, 2, 3] : (tensor<3x3x1x9xf32>) -> tensor<3x3x4x9xf32>
  %k = stablehlo.reverse %h, dims = [0, 1] : tensor<3x3x4x9xf32>
  %0 = stablehlo.convolution(%dy, %k) dim_numbers = [b, 0, 1, f]x[0, 1, o, i]->[b, 0, 1, f], window = {{pad = [[1, 1], [1, 1]]}} {{batch_group_count = 1 : i64, feature_group_count = 4 : i64}} : (tensor<2x9x7x36xf32>, tensor<3x3x4x9xf32>) -> tensor<2x9x7x4xf32>
  return %0 : tensor<2x9x7x4xf32>
}}"""


def run_against_reference(text: str, seed: int):
    program = compile_module(frontdoor.import_text(text, "patches", new_context()).module)
    module = frontdoor.import_text(text, "patches", new_context()).module
    arguments = random_arguments(module, seed=seed)
    return program, Executable.of(program).execute(arguments)[0], reference_outputs(module, arguments)[0]


@pytest.mark.parametrize("name", PATCHES)
def test_patch_extraction_is_slices_with_the_reference_values(name):
    program, ours, reference = run_against_reference(patches(*PATCHES[name]), seed=3)
    assert not any("convolution strategy" in decision for decision in program.decisions), program.decisions
    np.testing.assert_array_equal(ours, reference)


def test_the_patch_gradient_is_a_sum_of_strided_slices():
    program, ours, reference = run_against_reference(GRADIENT, seed=4)
    assert not any("convolution strategy" in decision for decision in program.decisions), program.decisions
    np.testing.assert_allclose(ours, reference, rtol=1e-6, atol=1e-6)


def test_a_kernel_weighing_its_selections_stays_a_convolution():
    program, ours, reference = run_against_reference(patches(*PATCHES["NHWC 3x3 SAME"], scale="2.0"), seed=5)
    assert any("convolution strategy" in decision for decision in program.decisions), program.decisions
    np.testing.assert_allclose(ours, reference, rtol=1e-6, atol=1e-6)
