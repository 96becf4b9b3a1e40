"""Programs the differential fuzzer once caught (`scripts/fuzz --save`, minimized, with their
seed): each runs natively and agrees with the reference interpreter. Plus a few fresh seeds,
so that the generator and its runner stay working."""

import glob
import os

import pytest

from mlirxla.fuzz import differential

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
