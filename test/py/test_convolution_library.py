"""The runtime library's register-tiled convolution (`backends/cpu/convolution_library.py`):
each block shape's function against numpy on strided, offset buffers with window strides
and dilations, and a dilated convolution compiled as a loop nest calling it."""

import ctypes

import numpy as np
import pytest

from mlirxla.backends.cpu import convolution_library, llvm_jit, object_archive
from mlirxla.transforms import convolution_strategy as strategy

from .test_convolution_strategy import compiled


def library_function(name: str):
    engine = llvm_jit.JitEngine(object_archive.pack([llvm_jit.library_object(name)]))
    pointer, size = ctypes.c_void_p, ctypes.c_int64
    prototype = ctypes.CFUNCTYPE(None, *([pointer, size] * 3 + [size] * len(convolution_library.SIZES)))
    return engine, prototype(engine.address(name))


def window_sum(x, k, stride, dilation, oh, ow):
    """out[b, y, x, g] = sum over p, q, c of x[b, y*sh + p*dh, x*sw + q*dw, c] * k[p, q, c, g], in float64."""
    kh, kw = k.shape[:2]
    total = 0.0
    for p in range(kh):
        for q in range(kw):
            rows = x[:, p * dilation[0]:p * dilation[0] + (oh - 1) * stride[0] + 1:stride[0]]
            window = rows[:, :, q * dilation[1]:q * dilation[1] + (ow - 1) * stride[1] + 1:stride[1]]
            total = total + np.einsum("nhwc,cf->nhwf", window.astype(np.float64), k[p, q].astype(np.float64))
    return total


@pytest.mark.parametrize("width, features", convolution_library.BLOCKS)
@pytest.mark.parametrize("stride, dilation, gap", [((1, 1), (1, 1), 0), ((1, 1), (1, 1), 3), ((2, 1), (1, 2), 0)],
                         ids=["adjacent-pixels", "wide-pixels", "strided-dilated"])
def test_library_convolution_accumulates_the_window_sums(width, features, stride, dilation, gap):
    """Input and output are views into larger buffers (an offset, rows wider than their
    pixels, with `gap` a pixel wider than its channels): the function reads them through the
    strides it is given and adds the window sums to what the output held. Adjacent pixels and
    no dilation take its path that runs a window row's columns and channels as one loop."""
    rng = np.random.default_rng(width * 100 + features)
    n, c, kh, kw = 2, 5, 3, 2
    oh, ow, f = 3, 4 * width, 2 * features
    h = (oh - 1) * stride[0] + (kh - 1) * dilation[0] + 1
    w = (ow - 1) * stride[1] + (kw - 1) * dilation[1] + 1
    x_buffer = rng.standard_normal((n, h + 1, w + 2, c + gap)).astype(np.float32)
    x = x_buffer[:, 1:, 2:, gap // 2:gap // 2 + c]  # offset 1 row, 2 columns (and a channel); pixel stride c + gap
    k = rng.standard_normal((kh, kw, c, f)).astype(np.float32)
    out_buffer = rng.standard_normal((n, oh, ow + 1, f + 8)).astype(np.float32)
    initial = out_buffer.copy()
    engine, function = library_function(convolution_library.function_name(width, features))
    item = 4

    def offset(view, buffer):
        return (view.__array_interface__["data"][0] - buffer.__array_interface__["data"][0]) // item

    out = out_buffer[:, :, 1:, 4:4 + f]
    function(x_buffer.ctypes.data, offset(x, x_buffer), k.ctypes.data, 0, out_buffer.ctypes.data, offset(out, out_buffer),
             n, oh, ow, c, f, kh, kw, *(s // item for s in x.strides[:3]), *(s // item for s in k.strides[:3]),
             *(s // item for s in out.strides[:3]), *stride, *dilation)
    expected = initial[:, :, 1:, 4:4 + f] + window_sum(x, k, stride, dilation, oh, ow)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4)
    untouched = np.ones(out_buffer.shape, bool)
    untouched[:, :, 1:, 4:4 + f] = False
    np.testing.assert_array_equal(out_buffer[untouched], initial[untouched])
    del engine


DILATED = """func.func @main(%x: tensor<1x9x9x3xf32>, %k: tensor<3x3x3x16xf32>) -> tensor<1x5x5x16xf32> {
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[0, 0], [0, 0]], rhs_dilate = [2, 2]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x9x9x3xf32>, tensor<3x3x3x16xf32>) -> tensor<1x5x5x16xf32>
  return %0 : tensor<1x5x5x16xf32>
}"""


def test_dilated_loop_nest_calls_the_library_with_its_dilation():
    with strategy.forcing(strategy.LOOP_NEST):
        executable, decisions = compiled(DILATED)
    assert any("1 convolution(s) as calls of the runtime library's register-tiled convolution" in line for line in decisions), decisions
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 9, 9, 3)).astype(np.float32)
    k = rng.standard_normal((3, 3, 3, 16)).astype(np.float32)
    np.testing.assert_allclose(executable.execute([x, k])[0], window_sum(x, k, (1, 1), (2, 2), 5, 5), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("empty", ["c", "kh", "oh"])
def test_library_convolution_with_an_empty_size_leaves_the_output(empty):
    """A size of 0 (no input channel, no filter row, no output row) adds nothing: the loops,
    tested at their bottom, are not entered."""
    sizes = dict(n=1, oh=2, ow=4, c=3, f=16, kh=3, kw=3)
    sizes[empty] = 0
    engine, function = library_function(convolution_library.function_name(4, 16))
    x = np.ones((1, 8, 8, 3), np.float32)
    k = np.ones((3, 3, 3, 16), np.float32)
    out = np.full((1, 2, 4, 16), 5.0, np.float32)
    function(x.ctypes.data, 0, k.ctypes.data, 0, out.ctypes.data, 0, *sizes.values(), 192, 24, 3, 144, 48, 16, 128, 64, 16,
             1, 1, 1, 1)
    np.testing.assert_array_equal(out, 5.0)
    del engine


CONVOLUTION_RELU_CONVOLUTION = """func.func @kernel(%x: memref<1x8x8x3xf32>, %k1: memref<3x3x3x16xf32>, %k2: memref<3x3x16x16xf32>, %out: memref<1x8x8x16xf32>) {
  %xt = bufferization.to_tensor %x restrict : memref<1x8x8x3xf32> to tensor<1x8x8x3xf32>
  %k1t = bufferization.to_tensor %k1 restrict : memref<3x3x3x16xf32> to tensor<3x3x3x16xf32>
  %k2t = bufferization.to_tensor %k2 restrict : memref<3x3x16x16xf32> to tensor<3x3x16x16xf32>
  %0 = stablehlo.convolution(%xt, %k1t) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x8x8x3xf32>, tensor<3x3x3x16xf32>) -> tensor<1x8x8x16xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<1x8x8x16xf32>
  %1 = stablehlo.maximum %0, %zero : tensor<1x8x8x16xf32>
  %2 = stablehlo.convolution(%1, %k2t) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x8x8x16xf32>, tensor<3x3x16x16xf32>) -> tensor<1x8x8x16xf32>
  bufferization.materialize_in_destination %2 in restrict writable %out : (tensor<1x8x8x16xf32>, memref<1x8x8x16xf32>) -> ()
  return
}"""


def test_relu_is_written_into_the_padded_input_of_the_next_convolution():
    """The relu between two convolutions is written straight into the interior of the second
    one's padded input (`materialization.write_padded_in_place`): the kernel's scratch is the
    first convolution's result and the two padded inputs, no buffer for the relu to be copied
    from; both convolutions are library calls, the second reading a view at an offset."""
    from mlirxla.backends.cpu import lowering
    from mlirxla.context import new_context
    from mlirxla.mlir import ir

    with new_context():
        module = ir.Module.parse(CONVOLUTION_RELU_CONVOLUTION)
        lowered = lowering.lower_to_llvm_dialect(module, "kernel")
        text = lowering.translate(module, "kernel")
    assert lowered.register_tiled_convolutions == 2
    assert sorted(argument.size for argument in lowered.scratch["kernel"]) == [10 * 10 * 3 * 4, 8 * 8 * 16 * 4, 10 * 10 * 16 * 4]
    assert text.count(f"call void @{convolution_library.function_name(4, 16)}(") == 2
