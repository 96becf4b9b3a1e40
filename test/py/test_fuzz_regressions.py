"""Programs the differential fuzzer once caught (`scripts/fuzz --save`, minimized, with their
seed): each runs natively and agrees with the reference interpreter. Plus a few fresh seeds,
so that the generator and its runner stay working."""

import glob
import os
import re

import numpy as np
import pytest

from mlirxla.fuzz import differential, programs

from .conftest import REPOSITORY

KEPT = sorted(glob.glob(os.path.join(REPOSITORY, differential.REGRESSIONS, "*.mlir")))


@pytest.mark.parametrize("path", KEPT, ids=[os.path.basename(p) for p in KEPT])
def test_kept_failure_stays_fixed(path):
    status, detail = differential.replay(path)
    assert status == "ok", detail


@pytest.mark.parametrize("seed", range(20))
def test_fresh_programs_agree_with_the_reference(seed):
    outcome = differential.check_seed(seed, steps=8)
    assert not outcome.failed, f"{outcome.status}: {outcome.detail}\n{outcome.program}"


def test_complex_values_are_compared_part_by_part():
    """An infinite imaginary part on both sides is equal: compared whole, numpy subtracted the
    infinities and called two close values apart (seed 292975 at 16 steps)."""
    near = np.array([complex(0.41438887, -np.inf)], np.complex64)
    assert differential.difference(near, np.array([complex(0.41438889, -np.inf)], np.complex64), "complex<f32>", 1e-4) is None
    assert differential.difference(near, np.array([complex(0.5, -np.inf)], np.complex64), "complex<f32>", 1e-4) is not None


def op_of(step) -> str:
    return re.search(r'"stablehlo\.(\w+)"', step.lines[0]).group(1)


def pads_or_dilates(convolution) -> bool:
    padding = re.search(r"padding = dense<(.*?)> :", convolution.lines[0]).group(1)
    dilation = re.search(r"lhs_dilation = array<i64: ([\d, ]+)>", convolution.lines[0]).group(1)
    return any(int(edge) for edge in re.findall(r"\d+", padding)) or any(int(factor) > 1 for factor in dilation.split(","))


def test_programs_keep_to_what_the_reference_and_xla_agree_on():
    """Where XLA (and this backend) and the reference interpreter differ by design, the
    generator keeps the operands away: a padded or lhs-dilated convolution's kernel is finite
    (XLA skips the padding and the holes, the interpreter multiplies their zeros: 0 * inf is
    NaN; seed 291098 and six more at 16 steps), and a bitcast reads a float only as an
    argument holds it (a computed float may differ by an ulp or in a NaN's sign; seeds 291589
    and 291605)."""
    convolutions = bitcasts = 0
    for seed in range(300):
        program, _ = programs.draw_program(seed, 16)
        steps = {step.value.name: step for step in program.steps}
        values = {value.name: value for value in program.arguments} | {name: step.value for name, step in steps.items()}
        for step in program.steps:
            if op_of(step) == "convolution" and pads_or_dilates(step):
                kernel = steps[step.operands[1]]
                assert op_of(kernel) == "select" and op_of(steps[kernel.operands[0]]) == "is_finite", step.lines
                convolutions += 1
            if op_of(step) == "bitcast_convert" and values[step.operands[0]].element in differential.TOLERANCE:
                assert step.operands[0] in {argument.name for argument in program.arguments}, step.lines
                bitcasts += 1
    assert convolutions and bitcasts
