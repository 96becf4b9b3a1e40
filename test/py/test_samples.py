"""Every JAX sample imports, verifies, runs, and agrees with the StableHLO reference interpreter."""

import os

import numpy as np
import pytest

from mlirxla.tools import run

from .conftest import JAX_PROGRAMS

RUNNABLE = [
    "01_mlp_softmax.stablehlo.mlir",
    "01_mlp_softmax.debuginfo.mlir",
    "01_mlp_softmax.export.mlir",
    "01_mlp_softmax.vhlo.bc",
    "02_scan_while_cond_gelu.stablehlo.mlir",
    "programs/mlp_softmax_small.stablehlo.mlir",
    "programs/scan.stablehlo.mlir",
]


# an RNN whose generated weights (standard normal, gain about 11) make it chaotic: any change
# in summation order grows without bound, so only the interpreter reproduces the interpreter
# (test_cpu_backend.py runs it natively with small weights)
CHAOTIC = {"programs/scan.stablehlo.mlir"}


@pytest.mark.parametrize("name", RUNNABLE)
def test_sample_matches_reference(name, tmp_path, capsys):
    """`mlirxla-run --check` on each sample: compiled for the CPU (the interpreter for the
    chaotic one), the outputs agree with the reference interpreter's."""
    outputs = tmp_path / "out.npz"
    backend = ["--backend", "reference"] if name in CHAOTIC else []
    status = run.main([os.path.join(JAX_PROGRAMS, name), "--check", "-o", str(outputs)] + backend)
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert "output(s) match" in printed
    assert len(np.load(outputs).files) >= 1
