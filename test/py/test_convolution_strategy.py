"""The convolution cost model (`transforms/convolution_strategy.py`): which strategy it picks
for large and tiny convolutions, that the thunk sequence's decisions show the choice and its
estimates, and that every strategy, forced, computes what numpy's float64 convolution does."""

import contextlib

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.backends.cpu.compiler import compile_module
from mlirxla.context import new_context
from mlirxla.mlir import ir
from mlirxla.pipelines.runner import RunOptions
from mlirxla.runtime.executable import Executable
from mlirxla.transforms import convolution_strategy as strategy

from .conftest import random_arguments, reference_outputs

NHWC_LAYER = """func.func @main(%x: tensor<{n}x{h}x{w}x{c}xf32>, %k: tensor<{kh}x{kw}x{c}x{f}xf32>) -> tensor<{n}x{oh}x{ow}x{f}xf32> {{
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {{stride = [{s}, {s}], pad = [[{top}, {bottom}], [{left}, {right}]]}} {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}} : (tensor<{n}x{h}x{w}x{c}xf32>, tensor<{kh}x{kw}x{c}x{f}xf32>) -> tensor<{n}x{oh}x{ow}x{f}xf32>
  return %0 : tensor<{n}x{oh}x{ow}x{f}xf32>
}}"""


def layer(n, h, c, f, k, stride=1, padding=((1, 1), (1, 1))):
    (top, bottom), (left, right) = padding
    oh = (h + top + bottom - k) // stride + 1
    ow = (h + left + right - k) // stride + 1
    text = NHWC_LAYER.format(n=n, h=h, w=h, c=c, f=f, kh=k, kw=k, oh=oh, ow=ow, s=stride, top=top, bottom=bottom, left=left, right=right)
    return text, (n, h, h, c), (k, k, c, f)


def numpy_convolution(x, k, stride, padding):
    (top, bottom), (left, right) = padding
    padded = np.pad(x.astype(np.float64), ((0, 0), (top, bottom), (left, right), (0, 0)))
    kh, kw = k.shape[:2]
    oh = (padded.shape[1] - kh) // stride + 1
    ow = (padded.shape[2] - kw) // stride + 1
    return sum(np.einsum("nhwc,cf->nhwf", padded[:, i:i + (oh - 1) * stride + 1:stride, j:j + (ow - 1) * stride + 1:stride], k[i, j])
               for i in range(kh) for j in range(kw))


def compiled(text: str, disabled: frozenset[str] = frozenset()):
    program = compile_module(frontdoor.import_text(text, "convolution.mlir", new_context()).module, RunOptions(disable_passes=disabled))
    return Executable.of(program), program.decisions


# the input-dilated convolutions below keep their dilation, which the im2col rows hold
WITH_INPUT_DILATION = frozenset({"xhlo-transposed-convolution-phases"})


def strategy_line(decisions: list[str]) -> str:
    return next(line for line in decisions if "convolution strategy" in line)


def test_large_convolution_takes_im2col_and_gemm():
    """One 64x64 image, whose rows (4.5 MiB) would leave the cache: 8 blocks of 8 output rows,
    each laid out and multiplied on one thread, in one kernel."""
    text, x_shape, k_shape = layer(1, 64, 32, 64, 3)
    executable, decisions = compiled(text)
    line = strategy_line(decisions)
    assert line.startswith("convolution: convolution strategy im2col_gemm; estimated im2col_gemm"), line
    assert "convolution: convolution as 8 blocks of 8 output rows of an image, each im2col + BLAS GEMM f32 512x64x288 on one thread" in decisions
    thunks = executable.plan.describe()
    assert "loop_nest" in line and "sliced kernel x8 convolution [convolution_blocks]" in thunks and "gemm convolution" not in thunks
    rng = np.random.default_rng(2)
    x, k = (rng.standard_normal(shape).astype(np.float32) for shape in (x_shape, k_shape))
    np.testing.assert_allclose(executable.execute([x, k])[0], numpy_convolution(x, k, 1, ((1, 1), (1, 1))), rtol=1e-4, atol=1e-3)


def test_a_batch_of_images_runs_in_blocks_of_im2col_and_gemm():
    """Two 16x16 images' rows (0.6 MiB) make a block, laid out and multiplied on one thread,
    in one kernel: no whole-batch rows, no GEMM thunk."""
    text, x_shape, k_shape = layer(8, 16, 32, 64, 3)
    executable, decisions = compiled(text)
    assert "convolution: convolution as 4 blocks of 2 image(s), each im2col + BLAS GEMM f32 512x64x288 on one thread" in decisions
    thunks = executable.plan.describe()
    assert "sliced kernel x4 convolution [convolution_blocks]" in thunks and "gemm convolution" not in thunks
    rng = np.random.default_rng(3)
    x, k = (rng.standard_normal(shape).astype(np.float32) for shape in (x_shape, k_shape))
    np.testing.assert_allclose(executable.execute([x, k])[0], numpy_convolution(x, k, 1, ((1, 1), (1, 1))), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("element", ["f32", "f64"])
@pytest.mark.parametrize("shape, blocks", [
    (dict(n=6, h=12, c=8, f=16, k=3), "2 blocks of 3 image(s)"),
    (dict(n=4, h=17, c=5, f=12, k=3, stride=2, padding=((1, 0), (0, 1))), "2 blocks of 2 image(s)"),
    (dict(n=3, h=10, c=4, f=8, k=5, padding=((2, 2), (2, 2))), "3 blocks of 1 image(s)"),
    # an image whose rows do not fit a block: blocks of its output rows, each reading the
    # image at its rows, the top padding moved past the rows before it
    (dict(n=1, h=40, c=32, f=16, k=3), "output rows of an image"),
    (dict(n=2, h=96, c=32, f=8, k=3, stride=2, padding=((1, 0), (0, 1))), "output rows of an image"),
], ids=["3-per-block", "strided-asymmetric", "odd-batch-5x5", "rows-of-one-image", "rows-strided-asymmetric"])
def test_convolution_blocks_match_numpy(shape, blocks, element):
    text, x_shape, k_shape = layer(**shape)
    with strategy.forcing(strategy.IM2COL_GEMM):
        executable, decisions = compiled(text.replace("f32", element))
    assert any(f"{blocks}, each im2col + BLAS GEMM {element}" in line for line in decisions), decisions
    rng = np.random.default_rng(4)
    dtype = np.float32 if element == "f32" else np.float64
    x, k = (rng.standard_normal(s).astype(dtype) for s in (x_shape, k_shape))
    expected = numpy_convolution(x, k, shape.get("stride", 1), shape.get("padding", ((1, 1), (1, 1))))
    tolerance = 1e-4 if element == "f32" else 1e-10
    np.testing.assert_allclose(executable.execute([x, k])[0], expected, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("batch, size, blocks", [
    (8, 32, (1, 16, 16)),  # one image's rows (1.1 MiB) exceed a block: two blocks of 16 output rows
    (16, 8, (8, 8, 2)),  # 72 KiB an image: as many as leave each of two threads a block
    (1, 8, None),  # one small image: the whole GEMM over the threads
    (64, 2, (32, 2, 2)),  # 4 rows an image: 32 images give each thread a block of 128 GEMM rows
    (4, 2, None),  # two images a block at most, 8 GEMM rows: too few
    (1, 112, (1, 8, 14)),  # 126 KiB of rows an output row: 8 (the most dividing 112 that fit)
    (2, 60, (1, 15, 8)),  # 60 rows: blocks of 15, four an image
])
def test_convolution_blocks(batch, size, blocks):
    from mlirxla.backends.cpu.convolution_gemm import Blocks, convolution_blocks

    shape = strategy.Geometry(batch, size, size, 32, 3, 3, 64, size, size, (1, 1), ((1, 1), (1, 1)), "f32", True,
                              (False, False, False), True, True, 64)
    assert convolution_blocks(shape, threads=2) == (Blocks(*blocks) if blocks else None)


def test_model_orders_the_estimates_as_measured():
    """GEMM efficiency falls with small dimensions; a nest with its features innermost slows
    with few channels, one with output positions innermost with short rows."""
    assert strategy.gemm_efficiency(8192, 64, 288) > strategy.gemm_efficiency(8192, 8, 288) > strategy.gemm_efficiency(8192, 8, 9)
    assert strategy.depth_efficiency(64) > strategy.depth_efficiency(3)
    assert strategy.spatial_efficiency(20000) > 0.95 > 0.15 > strategy.spatial_efficiency(32)


# jnp.convolve(x, k, mode="same") of a signal of 4000 samples with 301 taps: one channel and
# one feature, the window reversed into the kernel
SIGNAL = """func.func @main(%x: tensor<1x4000x1xf32>, %k: tensor<301x1x1xf32>) -> tensor<1x4000x1xf32> {
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {stride = [1], pad = [[150, 150]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x4000x1xf32>, tensor<301x1x1xf32>) -> tensor<1x4000x1xf32>
  return %0 : tensor<1x4000x1xf32>
}"""


def test_a_signal_convolution_runs_as_loops_not_im2col_rows():
    """Output positions innermost along a row of 4000, each tap broadcast: the nest, not the
    1.2 million elements of im2col rows multiplied by one column."""
    executable, decisions = compiled(SIGNAL)
    assert strategy_line(decisions).startswith("convolution: convolution strategy loop_nest;"), decisions
    rng = np.random.default_rng(5)
    x, k = rng.standard_normal(4000).astype(np.float32), rng.standard_normal(301).astype(np.float32)
    got = executable.execute([x.reshape(1, 4000, 1), k.reshape(301, 1, 1)])[0].reshape(4000)
    expected = np.correlate(np.pad(x.astype(np.float64), 150), k.astype(np.float64), mode="valid")
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("forced", [strategy.GEMM, strategy.IM2COL_GEMM, strategy.LOOP_NEST])
@pytest.mark.parametrize("shape", [
    dict(n=2, h=9, c=5, f=7, k=3, stride=2, padding=((1, 0), (0, 1))),
    dict(n=2, h=8, c=16, f=24, k=1, padding=((0, 0), (0, 0))),
    dict(n=1, h=6, c=3, f=4, k=5, padding=((2, 2), (2, 2))),
], ids=["strided-asymmetric", "pointwise", "5x5"])
def test_every_strategy_forced_matches_numpy(forced, shape):
    text, x_shape, k_shape = layer(**shape)
    with strategy.forcing(forced):
        executable, decisions = compiled(text)
    line = strategy_line(decisions)
    takes_it = forced != strategy.GEMM or shape["k"] == 1
    assert (f"strategy {forced} (forced)" in line) == takes_it, line
    rng = np.random.default_rng(5)
    x = rng.standard_normal(x_shape).astype(np.float32)
    k = rng.standard_normal(k_shape).astype(np.float32)
    expected = numpy_convolution(x, k, shape.get("stride", 1), shape["padding"])
    np.testing.assert_allclose(executable.execute([x, k])[0], expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape, tiled", [
    (dict(n=2, h=8, c=3, f=16, k=3), True),  # 8 columns: blocks of 4 x 16
    (dict(n=1, h=6, c=4, f=24, k=3), True),  # 6 columns, 24 features: blocks of 2 x 8
    (dict(n=1, h=9, c=5, f=8, k=3, stride=2, padding=((1, 0), (0, 1))), True),  # 5 columns: blocks of 1 x 8
    (dict(n=1, h=6, c=3, f=12, k=3), False),  # 12 features: neither 16 nor 8 divides them
], ids=["4x16", "2x8", "strided-1x8", "untiled"])
def test_register_tiled_loop_nest_matches_numpy(shape, tiled):
    text, x_shape, k_shape = layer(**shape)
    with strategy.forcing(strategy.LOOP_NEST):
        executable, decisions = compiled(text)
    assert any("runtime library's register-tiled convolution" in line for line in decisions) == tiled, decisions
    rng = np.random.default_rng(6)
    x = rng.standard_normal(x_shape).astype(np.float32)
    k = rng.standard_normal(k_shape).astype(np.float32)
    expected = numpy_convolution(x, k, shape.get("stride", 1), shape.get("padding", ((1, 1), (1, 1))))
    np.testing.assert_allclose(executable.execute([x, k])[0], expected, rtol=1e-4, atol=1e-4)


# the kernel gradient of an NHWC x HWIO layer with stride s, as jax emits it
LAYER_KERNEL_GRADIENT = """func.func @main(%x: tensor<{n}x{h}x{h}x{c}x{e}>, %dy: tensor<{n}x{oh}x{oh}x{f}x{e}>) -> tensor<{k}x{k}x{c}x{f}x{e}> {{
  %0 = stablehlo.convolution(%x, %dy) dim_numbers = [f, 0, 1, b]x[i, 0, 1, o]->[0, 1, b, f], window = {{stride = [1, 1], pad = [[{low}, {high}], [{low}, {high}]], rhs_dilate = [{s}, {s}]}} {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}} : (tensor<{n}x{h}x{h}x{c}x{e}>, tensor<{n}x{oh}x{oh}x{f}x{e}>) -> tensor<{k}x{k}x{c}x{f}x{e}>
  return %0 : tensor<{k}x{k}x{c}x{f}x{e}>
}}"""


def kernel_gradient(n, h, c, f, k, s, low, element="f32"):
    oh = (h + 2 * low - k) // s + 1
    high = (k - 1) + (oh - 1) * s - (h - 1) - low
    text = LAYER_KERNEL_GRADIENT.format(n=n, h=h, c=c, f=f, k=k, s=s, oh=oh, low=low, high=high, e=element)
    rng = np.random.default_rng(8)
    dtype = np.float32 if element == "f32" else np.float64
    x, dy = rng.standard_normal((n, h, h, c)).astype(dtype), rng.standard_normal((n, oh, oh, f)).astype(dtype)
    after = max(high, 0)  # a negative padding after trims rows and columns no window reads
    padded = np.pad(x.astype(np.float64), ((0, 0), (low, after), (low, after), (0, 0)))
    expected = np.stack([np.stack([np.einsum("nhwc,nhwf->cf", padded[:, i:i + (oh - 1) * s + 1:s, j:j + (oh - 1) * s + 1:s], dy)
                                   for j in range(k)]) for i in range(k)])
    return text, (x, dy), expected


def test_a_layer_kernel_gradient_is_its_im2col_rows_transposed_times_the_output_gradient(monkeypatch):
    """jax's kernel gradient of a stride-2 3x3 layer (16 images of 32x32x16 -> 32) is the
    layer's im2col rows, transposed, times the output gradient as it lies: no transposes,
    and the model prefers it to them. On two threads it runs in 4 blocks of 4 images, each
    block's rows in cache for its GEMM into a part of its own, the parts summed."""
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", "2")
    text, arguments, expected = kernel_gradient(16, 32, 16, 32, 3, 2, 1)
    executable, decisions = compiled(text)
    assert "convolution strategy weight_gradient_gemm;" in strategy_line(decisions), decisions
    assert ("convolution: kernel gradient as 4 blocks of 4 image(s), each its im2col rows, transposed, times its output gradient, "
            "BLAS GEMM f32 144x32x1024 on one thread, the parts summed") in decisions, decisions
    thunks = executable.plan.describe()
    assert "sliced kernel x4 convolution.blocks" in thunks and "kernel convolution.sum" in thunks and "transpose" not in thunks, thunks
    np.testing.assert_allclose(executable.execute(list(arguments))[0], expected, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("element", ["f32", "f64"])
@pytest.mark.parametrize("shape, blocks", [
    (dict(n=4, h=16, c=4, f=8, k=3, s=1, low=1), "2 blocks of 2 image(s)"),
    (dict(n=1, h=64, c=32, f=16, k=3, s=1, low=1), {"f32": "8 blocks of 8 output rows", "f64": "16 blocks of 4 output rows"}),
    (dict(n=2, h=96, c=16, f=8, k=3, s=2, low=1), {"f32": "4 blocks of 24 output rows", "f64": "6 blocks of 16 output rows"}),
], ids=["image-blocks", "row-blocks", "strided-row-blocks"])
def test_kernel_gradients_in_blocks_match_numpy(monkeypatch, shape, blocks, element):
    """A kernel gradient's blocks of whole images and of an image's output rows (stride 1,
    and stride 2 with padding, whose later blocks start past the top padding), f32 and f64,
    on two threads: the parts summed match numpy's float64 sums."""
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", "2")
    text, arguments, expected = kernel_gradient(**shape, element=element)
    executable, decisions = compiled(text)
    wanted = blocks if isinstance(blocks, str) else blocks[element]
    assert any(f"kernel gradient as {wanted}" in line for line in decisions), decisions
    tolerance = 1e-3 if element == "f32" else 1e-10
    np.testing.assert_allclose(executable.execute(list(arguments))[0], expected, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("element", ["f32", "f64"])
@pytest.mark.parametrize("shape", [
    dict(n=3, h=9, c=5, f=7, k=3, s=2, low=0),
    dict(n=2, h=8, c=4, f=6, k=3, s=1, low=1),
    dict(n=4, h=11, c=3, f=8, k=5, s=3, low=2),
], ids=["stride-2-unpadded", "stride-1-same", "5x5-stride-3"])
def test_kernel_gradients_forced_as_gemms_match_numpy(shape, element):
    text, arguments, expected = kernel_gradient(**shape, element=element)
    with strategy.forcing(strategy.WEIGHT_GRADIENT_GEMM):
        executable, decisions = compiled(text)
    assert "strategy weight_gradient_gemm (forced)" in strategy_line(decisions)
    tolerance = 1e-4 if element == "f32" else 1e-10
    np.testing.assert_allclose(executable.execute(list(arguments))[0], expected, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("shape", [
    dict(n=16, h=16, c=64, f=128, k=1, s=2, low=0),  # a stride-2 1x1 shortcut, padded "SAME": pad [0, -1]
    dict(n=4, h=16, c=8, f=16, k=3, s=2, low=0),  # a stride-2 3x3 layer, unpadded: pad [0, -1]
], ids=["1x1-shortcut", "3x3-unpadded"])
def test_kernel_gradients_with_negative_padding_after_are_gemms(monkeypatch, shape):
    """A stride-2 layer whose last input row and column no window reads has a kernel gradient
    padded by -1 after them (jax trims them): the GEMM reads its rows at the low padding only,
    so it is still the layer's im2col rows times the output gradient (a loop nest ran the 1x1
    shortcut's at 8 GFLOP/s, 2 ms of a ResNet step's 60), in blocks, matching numpy."""
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", "2")
    text, arguments, expected = kernel_gradient(**shape)
    assert "[0, -1]" in text
    executable, decisions = compiled(text)
    assert "convolution strategy weight_gradient_gemm;" in strategy_line(decisions), decisions
    assert any("kernel gradient as" in line for line in decisions), decisions
    np.testing.assert_allclose(executable.execute(list(arguments))[0], expected, rtol=1e-4, atol=1e-3)


def test_forcing_an_unknown_strategy_is_refused():
    with pytest.raises(ValueError, match="unknown convolution strategy 'winograd'"):
        with strategy.forcing("winograd"):
            pass


# --- xhlo-convolution-layout ------------------------------------------------------------------

NCHW_LAYER = """func.func @main(%x: tensor<{n}x{c}x{h}x{h}xf32>, %k: tensor<{f}x{c}x3x3xf32>) -> tensor<{n}x{f}x{h}x{h}xf32> {{
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {{stride = [1, 1], pad = [[1, 1], [1, 1]]}} {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}} : (tensor<{n}x{c}x{h}x{h}xf32>, tensor<{f}x{c}x3x3xf32>) -> tensor<{n}x{f}x{h}x{h}xf32>
  return %0 : tensor<{n}x{f}x{h}x{h}xf32>
}}"""

# the weight gradient jax emits: batch and features swapped in the input, the output gradient as kernel
WEIGHT_GRADIENT = """func.func @main(%x: tensor<2x6x6x3xf32>, %dy: tensor<2x6x6x4xf32>) -> tensor<3x3x3x4xf32> {
  %0 = stablehlo.convolution(%x, %dy) dim_numbers = [f, 0, 1, b]x[i, 0, 1, o]->[0, 1, b, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x6x6x3xf32>, tensor<2x6x6x4xf32>) -> tensor<3x3x3x4xf32>
  return %0 : tensor<3x3x3x4xf32>
}"""


def layout_pass_run(text: str, context):
    from mlirxla.pipelines.pipeline import Pipeline
    from mlirxla.pipelines.runner import PipelineRunner
    from mlirxla.transforms.convolution_layout import ConvolutionLayoutPass

    module = frontdoor.import_text(text, "layout.mlir", context).module
    arguments = random_arguments(module, 7)
    before = reference_outputs(module, arguments)
    runner = PipelineRunner(module)
    runner.run(Pipeline("layout").add(ConvolutionLayoutPass()).add("xhlo-verify"))
    decisions = runner.reports["xhlo-convolution-layout"].dump_files()["convolution-layout-decisions.txt"]
    return module, decisions, before, reference_outputs(module, arguments)


@pytest.mark.parametrize("text", [NCHW_LAYER.format(n=2, c=3, h=5, f=4), WEIGHT_GRADIENT], ids=["nchw", "weight-gradient"])
def test_layout_pass_forced_keeps_results_on_the_reference_interpreter(text, context):
    with strategy.forcing(strategy.TRANSPOSED_GEMM):
        module, decisions, before, after = layout_pass_run(text, context)
    assert "transposed to NHWC x HWIO -> NHWC (transposed_gemm (forced)" in decisions, decisions
    assert str(module).count("xhlo.transpose") >= 2
    for a, b in zip(after, before):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_layout_pass_keeps_a_tiny_convolution(context):
    module, decisions, _, _ = layout_pass_run(NCHW_LAYER.format(n=1, c=2, h=4, f=2), context)
    assert ": kept (loop_nest;" in decisions and "xhlo.transpose" not in str(module)


def test_large_nchw_convolution_runs_as_a_gemm_between_transposes():
    executable, decisions = compiled(NCHW_LAYER.format(n=4, c=32, h=16, f=64))
    assert "strategy im2col_gemm;" in strategy_line(decisions)
    rng = np.random.default_rng(9)
    x = rng.standard_normal((4, 32, 16, 16)).astype(np.float32)
    k = (0.1 * rng.standard_normal((64, 32, 3, 3))).astype(np.float32)
    expected = numpy_convolution(x.transpose(0, 2, 3, 1), k.transpose(2, 3, 1, 0), 1, ((1, 1), (1, 1))).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(executable.execute([x, k])[0], expected, rtol=1e-4, atol=1e-4)


# --- batch-slice fusion asks the model --------------------------------------------------------

CONV_PAIR = """func.func @main(%x: tensor<8x32x32x32xf32>, %k1: tensor<3x3x32x64xf32>, %k2: tensor<3x3x64x32xf32>) -> tensor<8x32x32x32xf32> {
  %0 = stablehlo.convolution(%x, %k1) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<8x32x32x32xf32>, tensor<3x3x32x64xf32>) -> tensor<8x32x32x64xf32>
  %1 = stablehlo.tanh %0 : tensor<8x32x32x64xf32>
  %2 = stablehlo.convolution(%1, %k2) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<8x32x32x64xf32>, tensor<3x3x64x32xf32>) -> tensor<8x32x32x32xf32>
  return %2 : tensor<8x32x32x32xf32>
}"""


@pytest.mark.parametrize("as_gemms", [True, False])
def test_batch_slice_fusion_keeps_gemm_convolutions_apart_when_asked(as_gemms, context):
    """Two large 3x3 layers: as loops in slices they would lose more than the 2 MiB
    intermediate's traffic saves, so with `convolutions-as-gemms` batch-slice fusion refuses
    (and both run as GEMMs); by default it merges them."""
    from mlirxla.pipelines import named_pipeline
    from mlirxla.pipelines.runner import PipelineRunner
    from mlirxla.transforms.batch_slice_fusion import BatchSliceFusionPass

    module = frontdoor.import_text(CONV_PAIR, "conv_pair.mlir", context).module
    pipeline = named_pipeline("cpu")
    chosen = BatchSliceFusionPass(convolutions_as_gemms=as_gemms)
    pipeline.steps = [chosen if isinstance(step, BatchSliceFusionPass) else step for step in pipeline.steps]
    runner = PipelineRunner(module)
    runner.run(pipeline)
    decisions = "\n".join(d.line() for d in runner.reports["xhlo-batch-slice-fusion"].decisions)
    assert ("slower as loops in slices than as GEMMs" in decisions) == as_gemms, decisions
    assert ("batch_slices" in str(module)) != as_gemms


# --- jax programs around convolutions, each strategy forced -----------------------------------


def jax_workloads():
    import jax
    import jax.numpy as jnp

    def convolve(x, w, stride=1, numbers=("NHWC", "HWIO", "NHWC"), groups=1):
        return jax.lax.conv_general_dilated(x, w, (stride, stride), "SAME", dimension_numbers=numbers, feature_group_count=groups)

    def batch_norm(x, w, scale, offset):
        y = convolve(x, w)
        mean = jnp.mean(y, axis=(0, 1, 2))
        return (y - mean) * jax.lax.rsqrt(jnp.mean(jnp.square(y - mean), axis=(0, 1, 2)) + 1e-5) * scale + offset

    def bias_relu_pool(x, w, b):
        y = jax.nn.relu(convolve(x, w) + b)
        return jax.lax.reduce_window(y, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    def loss(x, w):
        return jnp.sum(jnp.square(convolve(x, w)))

    shape = lambda *s: jax.ShapeDtypeStruct(s, jnp.float32)
    x, w = shape(2, 8, 8, 4), shape(3, 3, 4, 8)
    return {
        "nchw": (lambda x, w: convolve(x, w, numbers=("NCHW", "OIHW", "NCHW")), (shape(2, 4, 8, 8), shape(8, 4, 3, 3))),
        "batch_norm": (batch_norm, (x, w, shape(8), shape(8))),
        "bias_relu_pool": (bias_relu_pool, (x, w, shape(8))),
        "depthwise": (lambda x, w: convolve(x, w, groups=4), (x, shape(3, 3, 1, 4))),
        "pointwise": (convolve, (x, shape(1, 1, 4, 8))),
        "strided": (lambda x, w: convolve(x, w, stride=2), (x, w)),
        "input_gradient": (jax.grad(loss, argnums=0), (x, w)),
        "weight_gradient": (jax.grad(loss, argnums=1), (x, w)),
    }


@pytest.mark.jax
@pytest.mark.parametrize("forced", [None, strategy.TRANSPOSED_GEMM, strategy.IM2COL_GEMM, strategy.LOOP_NEST])
@pytest.mark.parametrize("name", ["nchw", "batch_norm", "bias_relu_pool", "depthwise", "pointwise", "strided", "input_gradient", "weight_gradient"])
def test_jax_convolutions_match_jax_cpu(name, forced):
    jax = pytest.importorskip("jax")
    from mlirxla.runtime.client import Client

    function, abstract = jax_workloads()[name]
    rng = np.random.default_rng(4)
    arguments = [rng.standard_normal(a.shape).astype(np.float32) for a in abstract]
    text = jax.jit(function).lower(*abstract).as_text()
    with strategy.forcing(forced) if forced else contextlib.nullcontext():
        executable = Client().compile(text)
    expected = jax.jit(function)(*jax.device_put(arguments, jax.local_devices(backend="cpu")[0]))
    np.testing.assert_allclose(executable.execute_numpy(arguments)[0], np.asarray(expected), rtol=1e-4, atol=1e-4)


def test_transposes_are_counted_only_for_what_is_out_of_place(context):
    """An input gradient's convolution reads its kernel as HWOI: only the kernel moves, so the
    transposed GEMM costs less than for an NCHW layer of the same size, whose input, kernel
    and output all move."""
    gradient = NHWC_LAYER.format(n=4, h=16, w=16, c=32, f=64, kh=3, kw=3, oh=16, ow=16, s=1, top=1, bottom=1, left=1, right=1)
    gradient = gradient.replace("[0, 1, i, o]", "[0, 1, o, i]").replace("tensor<3x3x32x64xf32>", "tensor<3x3x64x32xf32>")
    seconds = {}
    for name, text in (("gradient", gradient), ("nchw", NCHW_LAYER.format(n=4, c=32, h=16, f=64))):
        module = frontdoor.import_text(text, f"{name}.mlir", context).module
        with context, ir.Location.unknown():
            convolution = next(op for op in module.body.operations[0].regions[0].blocks[0].operations if op.operation.name == "xhlo.convolution")
            geometry = strategy.geometry(convolution.operation)
            seconds[name] = strategy.choose(convolution.operation).seconds(strategy.TRANSPOSED_GEMM)
        assert sum(geometry.out_of_place) == (1 if name == "gradient" else 3)
    assert seconds["gradient"] < seconds["nchw"]


TWO_CONVOLUTIONS_KERNEL = """func.func @two_convolutions(%x: memref<1x8x8x3xf32>, %k1: memref<3x3x3x16xf32>, %k2: memref<3x3x16x16xf32>, %out: memref<1x8x8x16xf32>) {
  %xt = bufferization.to_tensor %x restrict : memref<1x8x8x3xf32> to tensor<1x8x8x3xf32>
  %k1t = bufferization.to_tensor %k1 restrict : memref<3x3x3x16xf32> to tensor<3x3x3x16xf32>
  %k2t = bufferization.to_tensor %k2 restrict : memref<3x3x16x16xf32> to tensor<3x3x16x16xf32>
  %0 = stablehlo.convolution(%xt, %k1t) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x8x8x3xf32>, tensor<3x3x3x16xf32>) -> tensor<1x8x8x16xf32>
  %1 = stablehlo.convolution(%0, %k2t) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x8x8x16xf32>, tensor<3x3x16x16xf32>) -> tensor<1x8x8x16xf32>
  bufferization.materialize_in_destination %1 in restrict writable %out : (tensor<1x8x8x16xf32>, memref<1x8x8x16xf32>) -> ()
  return
}"""


def test_register_blocks_accumulate_in_place(monkeypatch):
    """The library convolution accumulates its register blocks in the convolution's own
    buffer: no block-sized scratch and no copy loops around it (when the blocks were built
    in the kernel, a copy there was a loop nest per block for LLVM to compile; the conv
    net's kernel had four)."""
    from mlirxla.backends.cpu import lowering

    copies_in_loops = []
    copies_as_loops = lowering.copies_as_loops

    def counting(module):
        copies_in_loops.extend(op for op in lowering.ops_named(module, "memref.copy") if op.parent.name == "scf.for")
        copies_as_loops(module)

    monkeypatch.setattr(lowering, "copies_as_loops", counting)
    with new_context():
        lowered = lowering.lower_to_llvm_dialect(ir.Module.parse(TWO_CONVOLUTIONS_KERNEL), "two_convolutions")
    assert lowered.register_tiled_convolutions == 2
    assert not [s for s in lowered.scratch["two_convolutions"] if s.size <= 4 * 16 * 4], lowered.scratch
    assert not copies_in_loops


@pytest.mark.parametrize("element", ["f32", "f64"])
@pytest.mark.parametrize("shape", [
    dict(n=2, h=9, c=5, f=7, k=3, stride=2, padding=((1, 0), (0, 1))),
    dict(n=3, h=6, c=3, f=4, k=5, padding=((2, 2), (2, 2))),
], ids=["strided-asymmetric", "5x5"])
def test_im2col_is_a_call_into_the_runtime_library(element, shape, monkeypatch, tmp_path):
    """An im2col convolution compiles no im2col code (a call into the runtime library with
    the convolution's sizes), and computes what numpy does, compiled and loaded from the
    compile cache (whose objects carry the library)."""
    from mlirxla.backends.cpu import llvm_jit
    from mlirxla.runtime.client import Client

    compiled_kernels = []
    compile_native = llvm_jit.compile_native
    monkeypatch.setattr(llvm_jit, "compile_native", lambda name, *rest: compiled_kernels.append(name) or compile_native(name, *rest))
    text, x_shape, k_shape = layer(**shape)
    text = text.replace("xf32>", f"x{element}>")
    rng = np.random.default_rng(7)
    x = rng.standard_normal(x_shape).astype(element.replace("f", "float"))
    k = rng.standard_normal(k_shape).astype(x.dtype)
    expected = numpy_convolution(x, k, shape.get("stride", 1), shape["padding"])
    with strategy.forcing(strategy.IM2COL_GEMM):
        for client in (Client(cache_dir=str(tmp_path)), Client(cache_dir=str(tmp_path))):  # compiled, then from the cache
            executable = client.compile(text)
            assert "im2col" in executable.thunk_sequence()
            np.testing.assert_allclose(executable.execute_numpy([x, k])[0], expected, rtol=1e-5, atol=1e-5)
    assert not [name for name in compiled_kernels if "im2col" in name], compiled_kernels


# --- dilations ---------------------------------------------------------------------------------

DILATED = """func.func @main(%x: tensor<{n}x{h}x{w}x{c}xf32>, %k: tensor<3x3x{kernel}xf32>) -> tensor<{n}x{oh}x{ow}x{f}xf32> {{
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, 0, 1, f]x[0, 1, {io}]->[b, 0, 1, f], window = {{stride = [{s}, 1], pad = [[{top}, 1], [2, {right}]], lhs_dilate = [{lh}, {lw}], rhs_dilate = [{dh}, {dw}]}} {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}} : (tensor<{n}x{h}x{w}x{c}xf32>, tensor<3x3x{kernel}xf32>) -> tensor<{n}x{oh}x{ow}x{f}xf32>
  return %0 : tensor<{n}x{oh}x{ow}x{f}xf32>
}}"""


def dilated(h, w, s, top, right, lhs, rhs, hwoi=False, n=2, c=8, f=16):
    """A 3x3 convolution of an n x h x w x c input into f features, its window's bottom and
    left padding fixed (1 and 2), its kernel in HWIO or HWOI."""
    def extent(size, dilation, low, high, tap, stride):
        return ((size - 1) * dilation + 1 + low + high - ((3 - 1) * tap + 1)) // stride + 1

    return DILATED.format(n=n, h=h, w=w, c=c, f=f, s=s, top=top, right=right, lh=lhs[0], lw=lhs[1], dh=rhs[0], dw=rhs[1],
                          kernel=f"{f}x{c}" if hwoi else f"{c}x{f}", io="o, i" if hwoi else "i, o",
                          oh=extent(h, lhs[0], top, 1, rhs[0], s), ow=extent(w, lhs[1], 2, right, rhs[1], 1))


@pytest.mark.parametrize("forced", [strategy.IM2COL_GEMM, strategy.TRANSPOSED_GEMM, strategy.LOOP_NEST])
@pytest.mark.parametrize("text", [
    dilated(4, 5, 1, 2, 1, lhs=(2, 2), rhs=(1, 1), hwoi=True),
    dilated(9, 7, 2, 1, 0, lhs=(1, 1), rhs=(2, 3)),
    dilated(5, 4, 1, 0, 3, lhs=(3, 2), rhs=(2, 1)),
], ids=["input-dilated-hwoi", "window-dilated-strided", "both"])
def test_dilated_convolutions_take_every_strategy_and_keep_their_values(forced, text, context):
    """The im2col rows of a dilated convolution hold the zeros an input dilation puts between
    pixels and skip the pixels a window dilation steps over: each strategy, forced, gives the
    reference interpreter's values."""
    with strategy.forcing(forced):
        executable, decisions = compiled(text, WITH_INPUT_DILATION)
    line = strategy_line(decisions)
    if forced == strategy.TRANSPOSED_GEMM:  # an HWOI kernel was transposed; then the model chose, a GEMM among the estimates
        assert "im2col_gemm" in line, line
    else:
        assert f"strategy {forced} (forced)" in line, line
    module = frontdoor.import_text(text, "dilated.mlir", context).module
    arguments = random_arguments(module, 4)
    [expected] = reference_outputs(module, arguments)
    np.testing.assert_allclose(executable.execute(arguments)[0], expected, rtol=1e-4, atol=1e-4)


def test_a_strided_layers_input_gradient_runs_as_a_gemm():
    """The transposed convolution of a stride-2 layer's input gradient, a kernel in HWOI: 1.9 s
    as loops, which the model estimated at 44 ms; a GEMM between transposes now."""
    executable, decisions = compiled(dilated(4, 4, 1, 2, 1, lhs=(2, 2), rhs=(1, 1), hwoi=True, n=16, c=256, f=128), WITH_INPUT_DILATION)
    assert "strategy im2col_gemm;" in strategy_line(decisions), decisions


# --- 1-D convolutions -------------------------------------------------------------------------

ONE_DIMENSIONAL = {
    "nwc, strided, padded, input-dilated": "func.func @main(%x: tensor<2x9x3xf32>, %w: tensor<3x3x4xf32>) -> tensor<2x9x4xf32> {\n"
        "  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {stride = [2], pad = [[1, 1]], lhs_dilate = [2]} "
        "{batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x9x3xf32>, tensor<3x3x4xf32>) -> tensor<2x9x4xf32>\n"
        "  return %0 : tensor<2x9x4xf32>\n}",
    "ncw x oiw, window-dilated": "func.func @main(%x: tensor<2x3x9xf32>, %w: tensor<4x3x3xf32>) -> tensor<2x4x5xf32> {\n"
        "  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0]x[o, i, 0]->[b, f, 0], window = {rhs_dilate = [2]} "
        "{batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x3x9xf32>, tensor<4x3x3xf32>) -> tensor<2x4x5xf32>\n"
        "  return %0 : tensor<2x4x5xf32>\n}",
    "depthwise": "func.func @main(%x: tensor<2x8x4xf32>, %w: tensor<3x1x4xf32>) -> tensor<2x8x4xf32> {\n"
        "  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {pad = [[1, 1]]} "
        "{batch_group_count = 1 : i64, feature_group_count = 4 : i64} : (tensor<2x8x4xf32>, tensor<3x1x4xf32>) -> tensor<2x8x4xf32>\n"
        "  return %0 : tensor<2x8x4xf32>\n}",
    "depthwise, reversed window": "func.func @main(%x: tensor<2x8x4xf32>, %w: tensor<3x1x4xf32>) -> tensor<2x8x4xf32> {\n"
        "  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {pad = [[1, 1]], reverse = [true]} "
        "{batch_group_count = 1 : i64, feature_group_count = 4 : i64} : (tensor<2x8x4xf32>, tensor<3x1x4xf32>) -> tensor<2x8x4xf32>\n"
        "  return %0 : tensor<2x8x4xf32>\n}",
    "reversed window": "func.func @main(%x: tensor<2x8x3xf32>, %w: tensor<3x3x4xf32>) -> tensor<2x8x4xf32> {\n"
        "  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {pad = [[1, 1]], reverse = [true]} "
        "{batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x8x3xf32>, tensor<3x3x4xf32>) -> tensor<2x8x4xf32>\n"
        "  return %0 : tensor<2x8x4xf32>\n}",
}


@pytest.mark.parametrize("name", list(ONE_DIMENSIONAL))
def test_one_dimensional_convolutions_run_as_two_dimensional_ones(name, context):
    """`xhlo-convolution-1d-to-2d` gives each a unit first spatial dimension; the values stay
    the reference interpreter's, under every strategy the model may pick."""
    text = ONE_DIMENSIONAL[name]
    executable, decisions = compiled(text)
    assert "estimated" in strategy_line(decisions)  # a 2-D geometry: the model chose
    module = frontdoor.import_text(text, "one_dimensional.mlir", context).module
    arguments = random_arguments(module, 11)
    [expected] = reference_outputs(module, arguments)
    np.testing.assert_allclose(executable.execute(arguments)[0], expected, rtol=1e-5, atol=1e-5)


def test_a_large_one_dimensional_convolution_leaves_the_plain_loops():
    """A 5-wide window over 16x1024x64: the register-tiled convolution or a GEMM, which the
    model reaches only for 2-D geometries."""
    text = ("func.func @main(%x: tensor<16x1024x64xf32>, %w: tensor<5x64x64xf32>) -> tensor<16x1024x64xf32> {\n"
            "  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {pad = [[2, 2]]} "
            "{batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<16x1024x64xf32>, tensor<5x64x64xf32>) -> tensor<16x1024x64xf32>\n"
            "  return %0 : tensor<16x1024x64xf32>\n}")
    _, decisions = compiled(text)
    assert any("register-tiled convolution" in line or "im2col + BLAS GEMM" in line for line in decisions), decisions
