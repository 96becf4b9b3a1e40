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
from mlirxla.transforms.priority_fusion import PriorityFusionPass, decision_text, explain

from .conftest import PASS_SAMPLES, SAMPLES, random_arguments, reference_outputs

PROGRAMS = PASS_SAMPLES



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


@pytest.mark.parametrize("name", PROGRAMS)
@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_fusion_keeps_results(name, backend, context):
    module = frontdoor.import_file(os.path.join(SAMPLES, name), context).module
    PipelineRunner(module).run(named_pipeline("simplification"))
    arguments = random_arguments(module, 7)
    before = reference_outputs(module, arguments)
    fusion = PriorityFusionPass(backend=backend)
    PipelineRunner(module).run(Pipeline("fusion").add(fusion).add("xhlo-verify"))
    assert "xhlo.fusion" in str(module)
    after = reference_outputs(module, arguments)
    for a, b in zip(after, before):
        np.testing.assert_array_equal(a, b)
    text = fusion.dump_files(module)["fusion-decisions.txt"]
    assert text.startswith("# fusion decisions:")
    assert "fused " in text


def test_explain_answers_from_the_log(context):
    module = frontdoor.import_file(os.path.join(SAMPLES, "programs/mlp_softmax_small.stablehlo.mlir"), context).module
    PipelineRunner(module).run(named_pipeline("simplification"))
    fusion = PriorityFusionPass()
    fusion.run(module)
    text = decision_text(fusion.decision_log)
    answer = explain(text, "dot")
    assert "was not fused" in answer and "library call" in answer
    assert "was fused" in explain(fusion.decision_log, "broadcast_add_fusion")
    assert "no fusion decision" in explain(text, "nothing-like-this")


def test_report_kernel_counts(context, capsys):
    for name in ["mlp", "softmax", "transformer", "convnet", "scan", "mlp_softmax_small"]:
        module = frontdoor.import_file(os.path.join(SAMPLES, "programs", f"{name}.stablehlo.mlir"), context).module
        PipelineRunner(module).run(named_pipeline("simplification"))
        before = kernel_count(module)
        PriorityFusionPass().run(module)
        with capsys.disabled():
            print(f"\nkernels {name}: {before} unfused -> {kernel_count(module)} fused")


def test_row_fusion_makes_softmax_one_kernel_with_the_same_results(context):
    """Reductions over the same rows join one kernel; the fused module computes the same."""
    text = open(os.path.join(SAMPLES, "programs", "softmax.stablehlo.mlir")).read()
    text = text.replace("4096x1024", "16x32").replace("4096x1", "16x1").replace("tensor<4096xf32>", "tensor<16xf32>")
    module = frontdoor.import_text(text, "softmax_small.mlir", context).module
    arguments = random_arguments(module, 5)
    before = reference_outputs(module, arguments)
    PipelineRunner(module).run(Pipeline("p").add(named_pipeline("simplification")).add(PriorityFusionPass()))
    assert kernel_count(module) == 1
    for a, b in zip(reference_outputs(module, arguments), before):
        np.testing.assert_array_equal(a, b)
