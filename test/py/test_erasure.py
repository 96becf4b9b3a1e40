"""Op handles across erasure: `live_ops` skips what a pass erased, the checker refuses any use
of an erased op, an exception inside a pass names the pass and the op, and every pass of the
cpu pipeline runs clean under the checker."""

from dataclasses import dataclass
from typing import ClassVar

import pytest

from mlirxla import frontdoor
from mlirxla.errors import MlirxlaError
from mlirxla.mlir import ir
from mlirxla.pipelines.cpu import cpu_pipeline
from mlirxla.pipelines.pipeline import Pipeline
from mlirxla.pipelines.runner import PipelineRunner, RunOptions
from mlirxla.transforms import erasure
from mlirxla.transforms.output_fusion import OutputFusionPass
from mlirxla.transforms.pass_base import ModulePass
from mlirxla.transforms.registry import PASSES, pass_class

CHAIN = """
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %a : tensor<4xf32>
  %1 = stablehlo.negate %0 : tensor<4xf32>
  %2 = stablehlo.negate %1 : tensor<4xf32>
  %3 = stablehlo.exponential %2 : tensor<4xf32>
  return %3 : tensor<4xf32>
}
"""

# Two dots, each with an elementwise epilogue later in the block: output fusion erases each
# epilogue, and its walk then reaches the erased one (the crash on jax.scipy.linalg.lu's grad).
TWO_EPILOGUES = """
func.func @main(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %1 = stablehlo.dot_general %b, %a, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %2 = stablehlo.add %0, %a : tensor<8x8xf32>
  %3 = stablehlo.multiply %1, %b : tensor<8x8xf32>
  return %2, %3 : tensor<8x8xf32>, tensor<8x8xf32>
}
"""


def xhlo_module(context, text: str) -> ir.Module:
    return frontdoor.import_text(text, "-", context).module


def top_level_ops(module: ir.Module) -> list[ir.Operation]:
    return [op.operation for op in module.body.operations[0].regions[0].blocks[0].operations]


@pytest.mark.parametrize("checking", [False, True])
def test_live_ops_skips_ops_erased_during_the_walk(context, checking):
    module = xhlo_module(context, CHAIN)
    seen = []
    with context, ir.Location.unknown(), erasure.stage("test", checking=checking):
        for op in erasure.live_ops(module.body.operations[0].regions[0].blocks[0]):
            seen.append(op.name)
            if op.name == "xhlo.negate":
                (use,) = list(op.results[0].uses)
                following = use.owner.operation
                following.results[0].replace_all_uses_with(op.operands[0])
                erasure.erase(following)
    assert seen == ["xhlo.add", "xhlo.negate", "xhlo.exponential", "func.return"]
    assert str(module).count("xhlo.negate") == 1


def test_checker_refuses_a_handle_of_an_erased_op(context):
    module = xhlo_module(context, CHAIN)
    with context, ir.Location.unknown(), erasure.stage("pass 'test'", checking=True):
        ops = top_level_ops(module)
        ops[3].results[0].replace_all_uses_with(ops[2].results[0])
        erasure.erase(ops[3])
        with pytest.raises(erasure.UseAfterErase, match=r"pass 'test' used xhlo.exponential at -:6:\d+ after erasing it"):
            ops[3].name
        with pytest.raises(erasure.UseAfterErase):
            ops[3].results
        assert ops[2].name == "xhlo.negate"


def test_checker_refuses_to_erase_an_op_still_used(context):
    module = xhlo_module(context, CHAIN)
    with context, ir.Location.unknown(), erasure.stage("pass 'test'", checking=True):
        with pytest.raises(MlirxlaError, match=r"pass 'test' erased xhlo.add while its result #0 is still used"):
            erasure.erase(top_level_ops(module)[0])


@dataclass(frozen=True)
class FailsOnNegatePass(ModulePass):
    name: ClassVar[str] = "test-fails-on-negate"
    summary: ClassVar[str] = "raises a Python error at the first negate"

    def run(self, module):
        for op in erasure.live_ops(module.body.operations[0].regions[0].blocks[0]):
            if op.name == "xhlo.negate":
                return [][1]
        return False


def test_an_exception_inside_a_pass_names_the_pass_and_the_op(context):
    module = xhlo_module(context, CHAIN)
    with pytest.raises(MlirxlaError) as caught:
        PipelineRunner(module).run(Pipeline("p").add(FailsOnNegatePass()))
    error = caught.value
    assert error.message == (
        "pass 'test-fails-on-negate' in pipeline 'p' failed while processing xhlo.negate: IndexError: list index out of range"
    )
    assert error.location.startswith("-:4:")


def test_output_fusion_never_touches_the_epilogues_it_erased(context):
    module = xhlo_module(context, TWO_EPILOGUES)
    PipelineRunner(module, RunOptions(check_erasure=True)).run(Pipeline("p").add(OutputFusionPass()))
    kinds = [op.attributes["kind"] for op in top_level_ops(module) if op.name == "xhlo.fusion"]
    assert [str(kind) for kind in kinds] == ['"output"', '"output"']


PROGRAMS = {"chain": CHAIN, "two_epilogues": TWO_EPILOGUES}


@pytest.mark.parametrize("program", sorted(PROGRAMS))
@pytest.mark.parametrize("name", sorted(name for name in PASSES if not name.startswith("test-")))
def test_every_pass_runs_clean_under_the_checker(context, program, name):
    """Each registered pass alone, with erasures checked and MLIR's verifier after it."""
    module = xhlo_module(context, PROGRAMS[program])
    PipelineRunner(module, RunOptions(check_erasure=True)).run(Pipeline("p").add(pass_class(name)()))
    module.operation.verify()


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_the_cpu_pipeline_runs_clean_under_the_checker(context, program):
    module = xhlo_module(context, PROGRAMS[program])
    PipelineRunner(module, RunOptions(check_erasure=True)).run(cpu_pipeline())
    module.operation.verify()
