"""The simplification and cpu pipelines leave results unchanged: on the JAX samples (checked
against the reference interpreter before and after) and on the whole conformance suite (its
checks still hold), while every large benchmark program still compiles to a verified module."""

import os

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.conformance import run_suite
from mlirxla.ir_queries import entry_function
from mlirxla.pipelines import named_pipeline
from mlirxla.pipelines.runner import PipelineRunner
from mlirxla.transforms.pass_base import ModulePass
from mlirxla.transforms.sharding_remover import partitioning_need
from mlirxla.transforms.verifier import verify_module

from .conftest import CONFORMANCE, CONFORMANCE_ABSENT, JAX_PROGRAMS, REPOSITORY, random_arguments, reference_outputs
from .test_samples import RUNNABLE

# too large for the reference interpreter in a test, or holding collectives it cannot run alone
# a [16, 64] x [64, 128] dense layer over a 2x2 mesh, rows on "data", columns on "model"
PARTITIONED = {name: "(tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8xf32>"
               for name in ("03_sharded_namedsharding.stablehlo.mlir", "04_sharded_gspmd_mhlo_sharding.stablehlo.mlir")}
# shard_map's input, rows on "data": each partition's rows enter the manual region
PARTITIONED["05_shard_map_psum.stablehlo.mlir"] = "(tensor<8x64xf32>) -> tensor<f32>"
VERIFIED_ONLY = [
    "03_sharded_namedsharding.stablehlo.mlir",
    "04_sharded_gspmd_mhlo_sharding.stablehlo.mlir",
    "05_shard_map_psum.stablehlo.mlir",
    "programs/mlp.stablehlo.mlir",
    "programs/softmax.stablehlo.mlir",
    "programs/transformer.stablehlo.mlir",
    "programs/convnet.stablehlo.mlir",
]


@pytest.mark.parametrize("pipeline", ["simplification", "cpu"])
@pytest.mark.parametrize("name", RUNNABLE)
def test_pipeline_keeps_sample_results(name, pipeline, context):
    module = frontdoor.import_file(os.path.join(JAX_PROGRAMS, name), context).module
    arguments = random_arguments(module, 7)
    before = reference_outputs(module, arguments)
    PipelineRunner(module).run(named_pipeline(pipeline))
    after = reference_outputs(module, arguments)
    assert len(after) == len(before)
    for a, b in zip(after, before):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", VERIFIED_ONLY)
def test_simplification_of_large_or_sharded_samples_verifies(name, context):
    """The cpu pipeline runs every one of its passes on the program and leaves a module that
    verifies (MLIR's verifier and the xhlo invariants) with the entry's signature unchanged,
    but for the sharded samples, which come out partitioned: each partition's signature."""
    module = frontdoor.import_file(os.path.join(JAX_PROGRAMS, name), context).module
    signature = str(entry_function(module).attributes["function_type"])
    runner = PipelineRunner(module)
    runner.run(named_pipeline("cpu"))
    verify_module(module, name)
    assert partitioning_need(module) is None
    assert str(entry_function(module).attributes["function_type"]) == PARTITIONED.get(name, signature)
    ran = {row.pass_name for row in runner.ledger.rows}
    assert {step.display_name for step in named_pipeline("cpu").steps if isinstance(step, ModulePass)} <= ran


@pytest.mark.skipif(not os.path.isdir(CONFORMANCE), reason=CONFORMANCE_ABSENT)
@pytest.mark.parametrize("pipeline", ["simplification", "cpu"])
def test_pipeline_keeps_conformance_results(pipeline):
    expected_path = os.path.join(REPOSITORY, "test", "conformance", "expected_failures.txt")
    from mlirxla.conformance import read_expected_failures

    report = run_suite(CONFORMANCE, expected_failures=read_expected_failures(expected_path), pipeline=pipeline)
    assert not report.unexpected_failures, [(o.name, o.reason) for o in report.unexpected_failures[:5]]
    assert not report.stale_expected
