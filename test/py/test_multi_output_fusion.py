"""xhlo-multi-output-fusion after priority fusion leaves results exactly unchanged on the JAX
samples, keeps the module valid and logs its decisions."""

import os

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.context import new_context
from mlirxla.pipelines import named_pipeline
from mlirxla.pipelines.pipeline import Pipeline
from mlirxla.pipelines.runner import PipelineRunner
from mlirxla.transforms.multi_output_fusion import MultiOutputFusionPass

from .conftest import JAX_PROGRAMS, PASS_SAMPLES, random_arguments, reference_outputs


def fusion_count(module) -> int:
    return str(module).count('"xhlo.fusion"')


def fused_module(name):
    module = frontdoor.import_file(os.path.join(JAX_PROGRAMS, name), new_context()).module
    PipelineRunner(module).run(named_pipeline("simplification"))
    PipelineRunner(module).run(Pipeline("fusion").add("xhlo-priority-fusion"))
    return module


@pytest.mark.parametrize("name", PASS_SAMPLES)
def test_multi_output_fusion_keeps_results(name):
    module = fused_module(name)
    context = module.context
    arguments = random_arguments(module, 11)
    before = reference_outputs(module, arguments)
    count = fusion_count(module)
    runner = PipelineRunner(module)
    runner.run(Pipeline("mof").add(MultiOutputFusionPass()).add("xhlo-verify"))
    with context:
        assert module.operation.verify()
    after = reference_outputs(module, arguments)
    assert len(after) == len(before)
    for a, b in zip(after, before):
        np.testing.assert_array_equal(a, b)
    assert fusion_count(module) <= count
    text = runner.reports["xhlo-multi-output-fusion"].dump_files()["multi-output-fusion-decisions.txt"]
    assert text.startswith("# multi-output fusion decisions:")


def test_transformer_siblings_merge_and_log():
    module = fused_module("programs/transformer.stablehlo.mlir")
    count = fusion_count(module)
    runner = PipelineRunner(module)
    runner.run(Pipeline("mof").add(MultiOutputFusionPass()).add("xhlo-verify"))
    assert fusion_count(module) < count
    report = runner.reports["xhlo-multi-output-fusion"]
    text = report.dump_files()["multi-output-fusion-decisions.txt"]
    assert "sibling fusion: merged" in text
    assert "apart: " in text  # refusals carry a reason
    assert all(d.reason for d in report.decisions if d.verdict == "refused")


def test_sibling_merge_keeps_results(context):
    """A merge that happens: two kernels reading the same value become one multi-output
    fusion, and the reference interpreter gives the same outputs before and after."""
    import numpy as np

    from mlirxla import frontdoor
    from mlirxla.mlir import ir
    from mlirxla.pipelines.pipeline import Pipeline
    from mlirxla.pipelines.runner import PipelineRunner
    from mlirxla.runtime import literals, reference

    text = """func.func @main(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %a = "xhlo.exponential"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %b = "xhlo.multiply"(%a, %a) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %c = "xhlo.negate"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %d = "xhlo.tanh"(%c) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %b, %d : tensor<8x16xf32>, tensor<8x16xf32>
}
"""
    module = frontdoor.import_text(text, "siblings.mlir", context).module
    arguments = [np.random.default_rng(3).standard_normal((8, 16)).astype(np.float32)]

    def run():
        with context, ir.Location.unknown():
            return [literals.to_numpy(v) for v in reference.execute(module, arguments).outputs]

    before = run()
    PipelineRunner(module).run(Pipeline("p").add("xhlo-priority-fusion").add("xhlo-multi-output-fusion"))
    fusions = [op for op in module.body.operations[0].regions[0].blocks[0].operations if op.operation.name == "xhlo.fusion"]
    assert len(fusions) == 1 and len(fusions[0].results) == 2
    for a, b in zip(run(), before):
        np.testing.assert_array_equal(a, b)


def test_reshapes_of_one_value_stay_apart(context):
    """Two reshapes of one parameter (jax's 1-D convolution reads its input as 2-D twice)
    are bitcasts once alone: as siblings of one fusion they would be a kernel copying it."""
    text = """func.func @main(%x: tensor<16x64xf32>, %w: tensor<64x8xf32>, %v: tensor<16x8xf32>) -> (tensor<16x8xf32>, tensor<64x8xf32>) {
  %a = stablehlo.reshape %x : (tensor<16x64xf32>) -> tensor<16x1x64xf32>
  %b = stablehlo.reshape %x : (tensor<16x64xf32>) -> tensor<16x1x64xf32>
  %c = stablehlo.dot_general %a, %w, contracting_dims = [2] x [0] : (tensor<16x1x64xf32>, tensor<64x8xf32>) -> tensor<16x1x8xf32>
  %d = stablehlo.reshape %c : (tensor<16x1x8xf32>) -> tensor<16x8xf32>
  %e = stablehlo.dot_general %b, %v, contracting_dims = [0] x [0] : (tensor<16x1x64xf32>, tensor<16x8xf32>) -> tensor<1x64x8xf32>
  %f = stablehlo.reshape %e : (tensor<1x64x8xf32>) -> tensor<64x8xf32>
  return %d, %f : tensor<16x8xf32>, tensor<64x8xf32>
}
"""
    module = frontdoor.import_text(text, "reshapes.mlir", context).module
    runner = PipelineRunner(module)
    runner.run(Pipeline("mof").add("xhlo-priority-fusion").add(MultiOutputFusionPass()).add("xhlo-verify"))
    assert fusion_count(module) == 0, str(module)


ADAM_STEP = """func.func @main(%p: tensor<64x32xf32>, %g: tensor<64x32xf32>, %m: tensor<64x32xf32>, %v: tensor<64x32xf32>, %rate: tensor<f32>) -> (tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x32xf32>) {
  %b1 = stablehlo.constant dense<0.9> : tensor<64x32xf32>
  %c1 = stablehlo.constant dense<0.1> : tensor<64x32xf32>
  %b2 = stablehlo.constant dense<0.999> : tensor<64x32xf32>
  %c2 = stablehlo.constant dense<0.001> : tensor<64x32xf32>
  %eps = stablehlo.constant dense<1.0e-8> : tensor<64x32xf32>
  %0 = stablehlo.multiply %b1, %m : tensor<64x32xf32>
  %1 = stablehlo.multiply %c1, %g : tensor<64x32xf32>
  %m_new = stablehlo.add %0, %1 : tensor<64x32xf32>
  %2 = stablehlo.multiply %b2, %v : tensor<64x32xf32>
  %3 = stablehlo.multiply %g, %g : tensor<64x32xf32>
  %4 = stablehlo.multiply %c2, %3 : tensor<64x32xf32>
  %v_new = stablehlo.add %2, %4 : tensor<64x32xf32>
  %5 = stablehlo.sqrt %v_new : tensor<64x32xf32>
  %6 = stablehlo.add %5, %eps : tensor<64x32xf32>
  %7 = stablehlo.broadcast_in_dim %rate, dims = [] : (tensor<f32>) -> tensor<64x32xf32>
  %8 = stablehlo.multiply %7, %m_new : tensor<64x32xf32>
  %9 = stablehlo.divide %8, %6 : tensor<64x32xf32>
  %p_new = stablehlo.subtract %p, %9 : tensor<64x32xf32>
  return %p_new, %m_new, %v_new : tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x32xf32>
}
"""


def test_an_optimizer_update_is_one_kernel_with_its_new_moments_as_extra_outputs(context):
    """Adam's new moments are returned and read by the parameter update: producer-consumer
    fusion into the update's loop makes them extra outputs of one kernel (no second kernel
    reading them back), with the reference interpreter's results unchanged."""
    from mlirxla.mlir import ir
    from mlirxla.runtime import literals, reference

    module = frontdoor.import_text(ADAM_STEP, "adam.mlir", context).module
    PipelineRunner(module).run(named_pipeline("simplification"))
    rng = np.random.default_rng(4)
    arguments = [rng.standard_normal((64, 32)).astype(np.float32) for _ in range(3)]
    arguments += [np.abs(rng.standard_normal((64, 32))).astype(np.float32), np.float32(1e-3)]

    def run():
        with context, ir.Location.unknown():
            return [literals.to_numpy(v) for v in reference.execute(module, arguments).outputs]

    before = run()
    runner = PipelineRunner(module)
    runner.run(Pipeline("p").add("xhlo-priority-fusion").add("xhlo-multi-output-fusion").add("xhlo-verify"))
    body = module.body.operations[0].regions[0].blocks[0]
    kernels = [op for op in body.operations if op.operation.name.startswith("xhlo.") and op.operation.name != "xhlo.return"]
    assert len(kernels) == 1 and kernels[0].operation.name == "xhlo.fusion" and len(kernels[0].results) == 3, str(module)
    text = runner.reports["xhlo-multi-output-fusion"].dump_files()["multi-output-fusion-decisions.txt"]
    assert "producer-consumer fusion: fused" in text, text
    for a, b in zip(run(), before):
        np.testing.assert_array_equal(a, b)
