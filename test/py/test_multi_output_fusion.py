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
