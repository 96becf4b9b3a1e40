"""xhlo-priority-fusion leaves results unchanged on the JAX samples, logs its decisions and
explains them."""

import os

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.mlir import ir
from mlirxla.pipelines import named_pipeline
from mlirxla.pipelines.pipeline import Pipeline
from mlirxla.pipelines.runner import PipelineRunner
from mlirxla.transforms.fusion_legality import NOT_KERNELS, kind_of
from mlirxla.transforms.batch_slice_fusion import BatchSliceFusionPass
from mlirxla.backends.cpu.compiler import compile_module
from mlirxla.transforms.buffer_assignment import memory_summary
from mlirxla.transforms.output_fusion import OutputFusionPass
from mlirxla.transforms.priority_fusion import PriorityFusionPass, decision_text, explain

from .conftest import JAX_PROGRAMS, PASS_SAMPLES, random_arguments, reference_outputs


def kernel_count(module) -> int:
    count = 0

    def visit(op):
        nonlocal count
        name = op.operation.name
        parent = op.operation.parent
        inside_fusion = False
        while parent is not None:
            if parent.name == "xhlo.fusion":
                inside_fusion = True
                break
            parent = parent.parent
        if name.startswith("xhlo.") and not inside_fusion and name not in ("xhlo.return", "xhlo.while", "xhlo.conditional", "xhlo.call"):
            if kind_of(op.operation) not in NOT_KERNELS and not _in_reducer(op.operation):
                count += 1
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return count


def _in_reducer(op) -> bool:
    parent = op.parent
    return parent is not None and parent.name not in ("func.func", "xhlo.while", "xhlo.conditional")


@pytest.mark.parametrize("name", PASS_SAMPLES)
@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_fusion_keeps_results(name, backend, context):
    module = frontdoor.import_file(os.path.join(JAX_PROGRAMS, name), context).module
    PipelineRunner(module).run(named_pipeline("simplification"))
    arguments = random_arguments(module, 7)
    before = reference_outputs(module, arguments)
    runner = PipelineRunner(module)
    runner.run(Pipeline("fusion").add(PriorityFusionPass(backend=backend)).add("xhlo-verify"))
    assert "xhlo.fusion" in str(module)
    after = reference_outputs(module, arguments)
    for a, b in zip(after, before):
        np.testing.assert_array_equal(a, b)
    text = runner.reports["xhlo-priority-fusion"].dump_files()["fusion-decisions.txt"]
    assert text.startswith("# fusion decisions:")
    assert "fused " in text


def test_explain_answers_from_the_log(context):
    module = frontdoor.import_file(os.path.join(JAX_PROGRAMS, "programs/mlp_softmax_small.stablehlo.mlir"), context).module
    PipelineRunner(module).run(named_pipeline("simplification"))
    decisions = PriorityFusionPass().run(module).report.decisions
    text = decision_text(decisions)
    answer = explain(text, "dot")
    assert "was not fused" in answer and "library call" in answer
    assert "was fused" in explain(decisions, "broadcast_add_fusion")
    assert "no fusion decision" in explain(text, "nothing-like-this")


@pytest.mark.jax
@pytest.mark.parametrize("name", ["mlp", "softmax", "transformer", "convnet"])
def test_cpu_pipeline_meets_the_xla_bars(name, context, xla_figures):
    """The issue's bars on the loop-free benchmark programs: no more kernels than XLA:CPU and
    at most 1.1x its temp bytes (XLA's figures from its own dump of the same program); and
    the executable's slab, temps plus the kernels' scratch, at most 1.1x XLA's temp for the
    mlp and the transformer, at most 64 KiB for the softmax (XLA's is empty)."""
    xla = xla_figures[name]
    module = frontdoor.import_file(os.path.join(JAX_PROGRAMS, "programs", f"{name}.stablehlo.mlir"), context).module
    PipelineRunner(module).run(named_pipeline("cpu"))
    assert kernel_count(module) <= xla["kernels"]
    assert memory_summary(module)["temp"] <= 1.1 * xla["temp_bytes"]
    plan = compile_module(module, run_pipeline=False).plan
    slab = sum(size for kind, size in zip(plan.allocation_kinds, plan.allocation_sizes) if kind == "temp")
    if name in ("mlp", "transformer"):
        assert slab <= 1.1 * xla["temp_bytes"]
    elif name == "softmax":
        assert slab <= 64 * 1024


CONV_CHAIN = """
func.func @main(%x: tensor<4x6x6x2xf32>, %k1: tensor<3x3x2x4xf32>, %b1: tensor<4xf32>, %k2: tensor<3x3x4x8xf32>, %w: tensor<8x3xf32>) -> tensor<4x3xf32> {
  %0 = stablehlo.convolution(%x, %k1) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<4x6x6x2xf32>, tensor<3x3x2x4xf32>) -> tensor<4x6x6x4xf32>
  %1 = stablehlo.broadcast_in_dim %b1, dims = [3] : (tensor<4xf32>) -> tensor<4x6x6x4xf32>
  %2 = stablehlo.add %0, %1 : tensor<4x6x6x4xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<4x6x6x4xf32>
  %3 = stablehlo.maximum %2, %zero : tensor<4x6x6x4xf32>
  %4 = stablehlo.convolution(%3, %k2) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<4x6x6x4xf32>, tensor<3x3x4x8xf32>) -> tensor<4x6x6x8xf32>
  %5 = stablehlo.tanh %4 : tensor<4x6x6x8xf32>
  %init = stablehlo.constant dense<0.0> : tensor<f32>
  %6 = stablehlo.reduce(%5 init: %init) applies stablehlo.add across dimensions = [1, 2] : (tensor<4x6x6x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %7 = stablehlo.dot_general %6, %w, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  %8 = stablehlo.exponential %7 : tensor<4x3xf32>
  return %8 : tensor<4x3xf32>
}
"""


def test_output_and_batch_slice_fusion_keep_results(context):
    """With small budgets a whole small conv net (convolutions, pooling, the dense layer and its
    epilogue) becomes one batch-slice kernel; the reference interpreter computes the same
    before and after."""
    module = frontdoor.import_text(CONV_CHAIN, "conv_chain.mlir", context).module
    arguments = random_arguments(module, 3)
    before = reference_outputs(module, arguments)
    pipeline = (Pipeline("fusions").add(PriorityFusionPass()).add(OutputFusionPass())
                .add(BatchSliceFusionPass(min_intermediate_bytes=64, max_slice_bytes=4096)).add("xhlo-verify"))
    PipelineRunner(module).run(pipeline)
    kinds = sorted(str(op.attributes["kind"]) for op in module.body.operations[0].regions[0].blocks[0].operations if op.operation.name == "xhlo.fusion")
    assert kinds == ['"custom"']
    for a, b in zip(reference_outputs(module, arguments), before):
        np.testing.assert_allclose(a, b, rtol=1e-6)


RESHAPED_CONVOLUTION = """
func.func @main(%x: tensor<4x64x8xf32>, %k: tensor<1x3x8x8xf32>) -> tensor<4x1x64x8xf32> {
  %0 = stablehlo.reshape %x : (tensor<4x64x8xf32>) -> tensor<4x1x64x8xf32>
  %1 = stablehlo.convolution(%0, %k) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[0, 0], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<4x1x64x8xf32>, tensor<1x3x8x8xf32>) -> tensor<4x1x64x8xf32>
  return %1 : tensor<4x1x64x8xf32>
}
"""


def test_batch_slice_fusion_leaves_a_reshape_to_become_a_bitcast(context):
    """A reshape alone moves no bytes once it is a bitcast: merged into the convolution it
    would save nothing and make the convolution a loop nest in slices (a 1-D convolution's
    reshape to 2-D, jax's conv1d)."""
    module = frontdoor.import_text(RESHAPED_CONVOLUTION, "reshaped_convolution.mlir", context).module
    runner = PipelineRunner(module)
    runner.run(Pipeline("batch slices").add(BatchSliceFusionPass(min_intermediate_bytes=64, max_slice_bytes=4096)).add("xhlo-verify"))
    decisions = runner.reports["xhlo-batch-slice-fusion"].dump_files()["batch-slice-fusion-decisions.txt"]
    assert "0 fused" in decisions and "the producer is a reshape, a bitcast once alone" in decisions, decisions
    assert "xhlo.fusion" not in str(module)


def test_row_fusion_makes_softmax_one_kernel_with_the_same_results(context):
    """Reductions over the same rows join one kernel; the fused module computes the same."""
    text = open(os.path.join(JAX_PROGRAMS, "programs", "softmax.stablehlo.mlir")).read()
    text = text.replace("4096x1024", "16x32").replace("4096x1", "16x1").replace("tensor<4096xf32>", "tensor<16xf32>")
    assert_one_kernel_with_the_same_results(frontdoor.import_text(text, "softmax_small.mlir", context).module)


def assert_one_kernel_with_the_same_results(module) -> None:
    """After the simplification pipeline and priority fusion, `module` is one kernel computing
    what it computed before, to the bit."""
    arguments = random_arguments(module, 5)
    before = reference_outputs(module, arguments)
    PipelineRunner(module).run(Pipeline("p").add(named_pipeline("simplification")).add(PriorityFusionPass()))
    assert kernel_count(module) == 1
    for a, b in zip(reference_outputs(module, arguments), before):
        np.testing.assert_array_equal(a, b)


LAYER_NORM = """func.func @main(%x: tensor<16x32xf32>, %scale: tensor<32xf32>, %offset: tensor<32xf32>) -> tensor<16x32xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<16x32xf32>, tensor<f32>) -> tensor<16xf32>
  %kept = stablehlo.reshape %sum : (tensor<16xf32>) -> tensor<16x1xf32>
  %count = stablehlo.constant dense<3.125000e-02> : tensor<16x1xf32>
  %mean = stablehlo.multiply %kept, %count : tensor<16x1xf32>
  %means = stablehlo.broadcast_in_dim %mean, dims = [0, 1] : (tensor<16x1xf32>) -> tensor<16x32xf32>
  %centered = stablehlo.subtract %x, %means : tensor<16x32xf32>
  %squares = stablehlo.multiply %centered, %centered : tensor<16x32xf32>
  %squares_sum = stablehlo.reduce(%squares init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<16x32xf32>, tensor<f32>) -> tensor<16xf32>
  %variance_kept = stablehlo.reshape %squares_sum : (tensor<16xf32>) -> tensor<16x1xf32>
  %variance = stablehlo.multiply %variance_kept, %count : tensor<16x1xf32>
  %epsilon = stablehlo.constant dense<1.0e-05> : tensor<16x1xf32>
  %variance_plus = stablehlo.add %variance, %epsilon : tensor<16x1xf32>
  %inverse = stablehlo.rsqrt %variance_plus : tensor<16x1xf32>
  %inverses = stablehlo.broadcast_in_dim %inverse, dims = [0, 1] : (tensor<16x1xf32>) -> tensor<16x32xf32>
  %normalized = stablehlo.multiply %centered, %inverses : tensor<16x32xf32>
  %scales = stablehlo.broadcast_in_dim %scale, dims = [1] : (tensor<32xf32>) -> tensor<16x32xf32>
  %offsets = stablehlo.broadcast_in_dim %offset, dims = [1] : (tensor<32xf32>) -> tensor<16x32xf32>
  %scaled = stablehlo.multiply %normalized, %scales : tensor<16x32xf32>
  %y = stablehlo.add %scaled, %offsets : tensor<16x32xf32>
  return %y : tensor<16x32xf32>
}
"""


def test_row_fusion_makes_a_layer_norm_one_kernel_with_the_same_results(context):
    """A layer norm's mean and variance, kept as [rows, 1] (keepdims), and its scale and offset,
    the same in every row, still work row by row: its two reductions join one kernel, which
    computes the same."""
    assert_one_kernel_with_the_same_results(frontdoor.import_text(LAYER_NORM, "layer_norm.mlir", context).module)


CAUSAL_SOFTMAX = """func.func @main(%scores: tensor<2x64x64xf32>) -> tensor<2x64x64xf32> {
  %rows = stablehlo.iota dim = 0 : tensor<64x64xi32>
  %columns = stablehlo.iota dim = 1 : tensor<64x64xi32>
  %causal = stablehlo.compare GE, %rows, %columns, SIGNED : (tensor<64x64xi32>, tensor<64x64xi32>) -> tensor<64x64xi1>
  %mask = stablehlo.broadcast_in_dim %causal, dims = [1, 2] : (tensor<64x64xi1>) -> tensor<2x64x64xi1>
  %hidden = stablehlo.constant dense<-1.0e30> : tensor<2x64x64xf32>
  %x = stablehlo.select %mask, %scores, %hidden : tensor<2x64x64xi1>, tensor<2x64x64xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [2] : (tensor<2x64x64xf32>, tensor<f32>) -> tensor<2x64xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0, 1] : (tensor<2x64xf32>) -> tensor<2x64x64xf32>
  %d = stablehlo.subtract %x, %mb : tensor<2x64x64xf32>
  %e = stablehlo.exponential %d : tensor<2x64x64xf32>
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [2] : (tensor<2x64x64xf32>, tensor<f32>) -> tensor<2x64xf32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [0, 1] : (tensor<2x64xf32>) -> tensor<2x64x64xf32>
  %r = stablehlo.divide %e, %sb : tensor<2x64x64xf32>
  return %r : tensor<2x64x64xf32>
}
"""


def test_row_fusion_takes_a_causal_mask_computed_from_iotas(context):
    """An attention's causal mask is [T, T], broadcast over the heads: neither a row's shape nor
    a column's, but a function of the element's position alone, so the masked softmax's two
    reductions still join one kernel (the benchmark transformer's attention was two)."""
    assert_one_kernel_with_the_same_results(frontdoor.import_text(CAUSAL_SOFTMAX, "causal_softmax.mlir", context).module)


def long_chain_divided_by_a_constant(length: int) -> str:
    """`length` elementwise ops on x, then the remainder by a constant (jax's randint: threefry
    rounds, then the bits modulo the span)."""
    lines = ["%v0 = stablehlo.add %x, %x : tensor<1024xui32>"]
    for n in range(length):
        op = ("xor", "add", "or")[n % 3]
        lines.append(f"%v{n + 1} = stablehlo.{op} %v{n}, %x : tensor<1024xui32>")
    body = "\n  ".join(lines)
    return f"""func.func @main(%x: tensor<1024xui32>) -> tensor<1024xui32> {{
  {body}
  %span = stablehlo.constant dense<1000> : tensor<1xui32>
  %spans = stablehlo.broadcast_in_dim %span, dims = [0] : (tensor<1xui32>) -> tensor<1024xui32>
  %r = stablehlo.remainder %v{length}, %spans : tensor<1024xui32>
  return %r : tensor<1024xui32>
}}
"""


def test_a_full_fusion_still_takes_in_a_constant(context):
    """A kernel at the size limit takes in a constant all the same: it is a number in the
    code instead of an operand loaded from memory (dividing by one, the kernel ran a scalar
    division per element)."""
    # 125 ops: the kernel reaches the size limit just before the constant is considered
    module = frontdoor.import_text(long_chain_divided_by_a_constant(125), "chain.mlir", context).module
    arguments = random_arguments(module, 5)
    before = reference_outputs(module, arguments)
    PipelineRunner(module).run(Pipeline("p").add(named_pipeline("simplification")).add(PriorityFusionPass()))
    main = module.body.operations[0]
    top = [op.operation.name for op in main.regions[0].blocks[0].operations]
    assert "xhlo.constant" not in top, top
    for a, b in zip(reference_outputs(module, arguments), before):
        np.testing.assert_array_equal(a, b)
