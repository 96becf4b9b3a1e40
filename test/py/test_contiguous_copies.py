"""Slices that read one contiguous range of their operand are memcpys, not kernels (issue 18:
a residual MLP of N layers slicing a stacked weight compiled two 300 KB multi-output slice
kernels per 128 layers through LLVM). Checked: which slices become copy thunks (a layer of a
stacked weight, a run of rows; not a column range, a strided slice, a slice of a computed
value's inner dimension), that their byte ranges are the right ones (the outputs equal the
reference interpreter's), that multi-output fusion leaves them apart, and that a slice read
by an elementwise consumer still fuses into it."""

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.backends.cpu.compiler import compile_module
from mlirxla.runtime.client import Client
from mlirxla.runtime.thunks import CopyThunk, KernelThunk, every_thunk

from .conftest import random_arguments, reference_outputs

SLICES = """
func.func @main(%w: tensor<4x8x16xf32>, %x: tensor<8x16xbf16>, %v: tensor<4x8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<1x3x16xf32>, tensor<4x8x4xf32>, tensor<2x16xbf16>, tensor<8x16xf32>, tensor<4x8x16xf32>) {
  %0 = stablehlo.slice %w [1:2, 0:8, 0:16] : (tensor<4x8x16xf32>) -> tensor<1x8x16xf32>
  %1 = stablehlo.reshape %0 : (tensor<1x8x16xf32>) -> tensor<8x16xf32>
  %2 = stablehlo.slice %w [3:4, 0:8, 0:16] : (tensor<4x8x16xf32>) -> tensor<1x8x16xf32>
  %3 = stablehlo.reshape %2 : (tensor<1x8x16xf32>) -> tensor<8x16xf32>
  %4 = stablehlo.slice %w [2:3, 4:7, 0:16] : (tensor<4x8x16xf32>) -> tensor<1x3x16xf32>
  %5 = stablehlo.slice %w [0:4, 0:8, 4:8] : (tensor<4x8x16xf32>) -> tensor<4x8x4xf32>
  %6 = stablehlo.slice %x [2:6:2, 0:16] : (tensor<8x16xbf16>) -> tensor<2x16xbf16>
  %7 = stablehlo.slice %v [0:1, 0:8, 0:16] : (tensor<4x8x16xf32>) -> tensor<1x8x16xf32>
  %8 = stablehlo.reshape %7 : (tensor<1x8x16xf32>) -> tensor<8x16xf32>
  %9 = stablehlo.exponential %8 : tensor<8x16xf32>
  %10 = stablehlo.add %v, %v : tensor<4x8x16xf32>
  return %1, %3, %4, %5, %6, %9, %10 : tensor<8x16xf32>, tensor<8x16xf32>, tensor<1x3x16xf32>, tensor<4x8x4xf32>, tensor<2x16xbf16>, tensor<8x16xf32>, tensor<4x8x16xf32>
}
"""


@pytest.fixture
def compiled(context):
    module = frontdoor.import_text(SLICES, "slices", context).module
    arguments = random_arguments(module, 5)
    return compile_module(module), arguments, reference_outputs(module, arguments)


def test_contiguous_slices_are_copies_from_inside_their_operand(compiled):
    program, _, _ = compiled
    copies = [thunk for thunk in every_thunk(program.plan.thunks) if isinstance(thunk, CopyThunk)]
    layer = 8 * 16 * 4
    assert sorted((copy.source.offset, copy.source.size) for copy in copies) == [(layer, layer), (2 * layer + 4 * 16 * 4, 3 * 16 * 4), (3 * layer, layer)]
    assert {copy.source.allocation for copy in copies} == {0}  # all three read the stacked weight's own buffer


def test_other_slices_stay_kernels_and_fuse(compiled):
    program, _, _ = compiled
    kernels = [thunk for thunk in every_thunk(program.plan.thunks) if isinstance(thunk, KernelThunk)]
    fused = [thunk.name for thunk in kernels if "exponential" in thunk.name]
    assert len(fused) == 1  # the slice of %v fused into its consumer
    assert len(kernels) == 4  # the column range and the strided slice are loops, and so is %v + %v


def test_copies_give_the_reference_results(compiled):
    _, arguments, expected = compiled
    outputs = Client().compile(SLICES).execute_numpy(arguments)
    for index, (ours, reference) in enumerate(zip(outputs, expected)):
        if index == 5:  # exp: within an ulp of the interpreter's
            np.testing.assert_allclose(ours, reference, rtol=2e-7)
        else:  # copied bytes, or exact arithmetic
            np.testing.assert_array_equal(np.asarray(ours), np.asarray(reference))
