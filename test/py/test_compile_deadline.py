"""A compile ends or refuses (`runtime/compile_deadline.py`): a pass that never returns is
stopped at the deadline with a one-line error naming it, and the process compiles on."""

import subprocess
import sys
import time

import numpy as np
import pytest

from mlirxla.errors import MlirxlaError
from mlirxla.runtime import compile_deadline
from mlirxla.runtime.client import Client
from mlirxla.transforms.algebraic_simplifier import AlgebraicSimplifierPass

DOUBLE = """
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


def spin(self, module):
    while True:
        pass


@pytest.mark.timeout(60)
def test_a_compile_spinning_in_a_pass_stops_at_its_deadline_naming_the_pass(monkeypatch):
    monkeypatch.setenv(compile_deadline.VARIABLE, "1")
    monkeypatch.setattr(AlgebraicSimplifierPass, "run", spin)
    start = time.monotonic()
    with pytest.raises(MlirxlaError, match=r"^<text>: the compile did not finish in 1 s; it was at pass \d+ xhlo-algsimp"):
        Client().compile(DOUBLE)
    assert time.monotonic() - start < 10
    monkeypatch.undo()
    (doubled,) = Client().compile(DOUBLE).execute_numpy([np.arange(4, dtype=np.float32)])
    np.testing.assert_array_equal(doubled, [0, 2, 4, 6])


def test_a_compile_that_ends_in_time_leaves_nothing_pending(monkeypatch):
    """The deadline passes just after the compile: the timer, cancelled, raises nothing into
    what the thread runs next."""
    with compile_deadline.deadline("quick", seconds=0.2):
        pass
    time.sleep(0.4)
    assert sum(range(1000)) == 499500


@pytest.mark.parametrize("setting", ["soon", "-3", "nan"])
def test_a_deadline_that_is_no_number_of_seconds_is_refused(monkeypatch, setting):
    monkeypatch.setenv(compile_deadline.VARIABLE, setting)
    with pytest.raises(MlirxlaError, match=f"MLIRXLA_COMPILE_TIMEOUT='{setting}': give the compile deadline in seconds"):
        Client().compile(DOUBLE)


def test_zero_turns_the_deadline_off(monkeypatch):
    monkeypatch.setenv(compile_deadline.VARIABLE, "0")
    assert compile_deadline.deadline_seconds() == 0
    (doubled,) = Client().compile(DOUBLE).execute_numpy([np.ones(4, dtype=np.float32)])
    np.testing.assert_array_equal(doubled, [2, 2, 2, 2])


AFTER_A_DEADLINE = """
import os, sys
os.environ["MLIRXLA_COMPILE_TIMEOUT"] = "1"
from mlirxla.errors import MlirxlaError
from mlirxla.runtime.client import Client
from mlirxla.transforms.algebraic_simplifier import AlgebraicSimplifierPass
AlgebraicSimplifierPass.run = lambda self, module: [None for _ in iter(int, 1)]
try:
    Client().compile(sys.argv[1])
except MlirxlaError:
    pass
calls = []
sys.setprofile(lambda frame, event, argument: calls.append(event))
(lambda: sum(range(10)))()
sys.setprofile(None)
print("profiled", len(calls) > 0)
"""


def test_after_a_deadline_the_thread_runs_profiled_code_on():
    """The exception sent at the deadline is never taken back with
    `PyThreadState_SetAsyncExc(id, NULL)`, which left the interpreter's signal for it set: the
    next frame run under a profile function spun in place (the plugin's own tests profile
    executions with sys.setprofile)."""
    done = subprocess.run([sys.executable, "-c", AFTER_A_DEADLINE, DOUBLE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "profiled True", done.stderr[-2000:]
