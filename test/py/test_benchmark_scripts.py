"""Every script of benchmarks/ starts: its imports resolve and `--help` prints its usage.

The scripts are run by hand, not by the tests, so a change to what they import from each
other (`cpu_vs_xla.py`'s helpers, the workloads) could leave one broken unnoticed, as
`jax_plugin_overhead.py` once was."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("jax")

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCHMARKS = os.path.join(REPOSITORY, "benchmarks")
SCRIPTS = sorted(name for name in os.listdir(BENCHMARKS) if name.endswith(".py"))


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_prints_its_usage(script):
    run = subprocess.run([sys.executable, os.path.join(BENCHMARKS, script), "--help"], capture_output=True, text=True,
                         timeout=300, cwd=REPOSITORY)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "usage:" in run.stdout
