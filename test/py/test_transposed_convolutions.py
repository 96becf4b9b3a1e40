"""Convolutions of a dilated input (`transforms/transposed_convolution_phases.py`): each is
split into one convolution per output phase, and the results, compiled for the CPU, are the
reference interpreter's for dilations of 2 and 3, windows with fewer taps than phases,
negative and large paddings, one dilated dimension of two, 1-D and NCHW convolutions."""

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.context import new_context
from mlirxla.runtime.client import Client, CompileOptions

from .conftest import random_arguments, reference_outputs


def dilated_convolution(layout, input_shape, kernel_shape, dilation, padding) -> str:
    """A stride-1 convolution whose input is dilated by `dilation` and padded by `padding`."""
    if layout == "NHWC":
        spatial_in, spatial_k = input_shape[1:-1], kernel_shape[:-2]
        numbers = "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]" if len(spatial_in) == 2 else "[b, 0, f]x[0, i, o]->[b, 0, f]"
    else:
        spatial_in, spatial_k = input_shape[2:], kernel_shape[2:]
        numbers = "[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]"
    out = [(n - 1) * s + 1 + lo + hi - k + 1 for n, s, (lo, hi), k in zip(spatial_in, dilation, padding, spatial_k)]
    features = kernel_shape[-1] if layout == "NHWC" else kernel_shape[0]
    output_shape = [input_shape[0], *out, features] if layout == "NHWC" else [input_shape[0], features, *out]

    def tensor(shape):
        return f"tensor<{'x'.join(map(str, shape))}xf32>"

    pads = ", ".join(f"[{lo}, {hi}]" for lo, hi in padding)
    ones = ", ".join("1" for _ in dilation)
    return f"""func.func @main(%x: {tensor(input_shape)}, %k: {tensor(kernel_shape)}) -> {tensor(output_shape)} {{
  %0 = stablehlo.convolution(%x, %k) dim_numbers = {numbers}, window = {{stride = [{ones}], pad = [{pads}], lhs_dilate = [{', '.join(map(str, dilation))}], rhs_dilate = [{ones}]}} {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}} : ({tensor(input_shape)}, {tensor(kernel_shape)}) -> {tensor(output_shape)}
  return %0 : {tensor(output_shape)}
}}"""


CASES = {
    "stride 2, 3x3, same": ("NHWC", (2, 7, 6, 5), (3, 3, 5, 4), (2, 2), ((1, 2), (1, 2))),
    "stride 2, 4x4": ("NHWC", (1, 5, 5, 3), (4, 4, 3, 2), (2, 2), ((2, 2), (2, 2))),
    "stride 3, 2x2: phases without taps": ("NHWC", (2, 4, 5, 3), (2, 2, 3, 2), (3, 3), ((1, 1), (1, 0))),
    "negative padding": ("NHWC", (1, 6, 6, 2), (3, 3, 2, 3), (2, 2), ((-1, 1), (0, -2))),
    "padding past the window": ("NHWC", (1, 3, 4, 2), (3, 2, 2, 2), (2, 2), ((4, 3), (3, 5))),
    "one dimension dilated": ("NHWC", (2, 5, 6, 3), (3, 3, 3, 2), (1, 2), ((1, 1), (2, 1))),
    "1-D": ("NHWC", (2, 9, 4), (5, 4, 3), (2,), ((3, 4),)),
    "NCHW": ("NCHW", (2, 3, 5, 4), (2, 3, 3, 3), (2, 3), ((2, 1), (1, 2))),
}


@pytest.mark.parametrize("case", CASES)
def test_a_dilated_input_convolution_is_split_into_phases_with_the_interpreters_results(tmp_path, case):
    text = dilated_convolution(*CASES[case])
    arguments = random_arguments(frontdoor.import_text(text, "test", new_context()).module, 5)
    [got] = Client().compile(text, CompileOptions(dump_to=str(tmp_path))).execute_numpy(arguments)
    [expected] = reference_outputs(frontdoor.import_text(text, "test", new_context()).module, arguments)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    optimized = next(tmp_path.glob("*.cpu_after_optimizations.mlir")).read_text()
    assert "xhlo.convolution" in optimized and "lhs_dilation" not in optimized
