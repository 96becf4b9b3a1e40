"""A slice of JAX's own test files on the plugin (benchmarks/jax_suite.py, a few cases per
file): every case that passes on jax's cpu backend passes on mlirxla.

JAX's tests are not part of this repository: set MLIRXLA_JAX_TESTS to the `tests/` folder of
jax-ml/jax at tag jax-v0.10.2 (with the `jax-suite` extra installed) to run them; without it
this test skips.
"""

import json
import os
import subprocess
import sys

import pytest

from .conftest import REPOSITORY

pytest.importorskip("jax")
pytest.importorskip("absl", reason="JAX's test files need the jax-suite extra (scripts/setup jax,test,jax-suite)")

pytestmark = [pytest.mark.jax, pytest.mark.slow]

JAX_TESTS = os.environ.get("MLIRXLA_JAX_TESTS", "")
# cases that once failed on the plugin, one or two families per file
SLICE = ("testRngBitGenerator or testSortNumKeys or testConvTranspose1D or testScatterApply or testLexsort or "
         "testSelect or testIndexApply or test_int4_unary or testBitcastConvertType or testFftfreq")


@pytest.mark.skipif(not os.path.isdir(JAX_TESTS), reason="set MLIRXLA_JAX_TESTS to jax-ml/jax's tests/ at tag jax-v0.10.2")
def test_slice_of_jax_tests_passes_on_the_plugin(tmp_path):
    report = tmp_path / "slice.json"
    done = subprocess.run(
        [sys.executable, os.path.join(REPOSITORY, "benchmarks", "jax_suite.py"), "--tests", JAX_TESTS, "--results", str(tmp_path),
         "-k", SLICE, "--json", str(report), "--failures"],
        capture_output=True, text=True, timeout=1200, check=False)
    assert done.returncode == 0, done.stderr
    table = json.loads(report.read_text())
    assert sum(passing for _, passing, _ in table["rows"]) >= 20, done.stdout
    assert all(not lost for lost in table["lost"].values()), done.stdout
