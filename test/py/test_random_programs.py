"""Random straight-line StableHLO DAGs (`mlirxla.fuzz.dags`: fusion, layouts, buffer sharing,
loops and conditionals holding such DAGs, shapes up to a few thousand elements and some over
1 MiB split over two threads) natively against the reference interpreter, on fixed seeds;
and the programs that generator once caught, minimized."""

import numpy as np
import pytest

from mlirxla import frontdoor
from mlirxla.context import new_context
from mlirxla.fuzz import dags
from mlirxla.runtime.client import Client

from .conftest import reference_outputs

BRANCHES_RETURN_BARRIERS = """func.func @main(%p: tensor<i1>, %a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %m = stablehlo.multiply %b, %b : tensor<4xf32>
  %r = "stablehlo.if"(%p) ({
    %x = stablehlo.optimization_barrier %m : tensor<4xf32>
    stablehlo.return %x : tensor<4xf32>
  }, {
    %y = stablehlo.optimization_barrier %a : tensor<4xf32>
    stablehlo.return %y : tensor<4xf32>
  }) : (tensor<i1>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
"""


@pytest.mark.parametrize("predicate", [True, False])
def test_branches_returning_barriers_of_their_operands_match_the_reference(predicate):
    """Each branch forwards its operand through a barrier; copy insertion used to let the
    multiply (the true branch's operand) write %a's buffer, the false branch's operand."""
    arguments = [np.bool_(predicate), np.linspace(0.5, 2, 4, dtype=np.float32), np.linspace(-1, 3, 4, dtype=np.float32)]
    got = Client().compile(BRANCHES_RETURN_BARRIERS).execute_numpy([a.copy() for a in arguments])
    (want,) = reference_outputs(frontdoor.import_text(BRANCHES_RETURN_BARRIERS, "if.mlir", new_context()).module, arguments)
    np.testing.assert_array_equal(got[0], want)
    np.testing.assert_array_equal(want, arguments[2] * arguments[2] if predicate else arguments[1])


@pytest.mark.parametrize("seeds", [range(start, start + 30) for start in range(0, 120, 30)], ids=["0-29", "30-59", "60-89", "90-119"])
def test_random_dags_match_the_reference(monkeypatch, seeds):
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", "2")
    for seed in seeds:
        status, detail, program = dags.check(seed)
        assert status == "ok", f"seed {seed}: {status}: {detail}\n{program}"


@pytest.mark.parametrize("seed", [3, 4])
def test_random_dags_over_a_mebibyte_match_the_reference(monkeypatch, seed):
    """Shapes over 1 MiB, where kernels split over the two threads."""
    monkeypatch.setenv("MLIRXLA_CPU_THREADS", "2")
    status, detail, program = dags.check(seed, big=True)
    assert status == "ok", f"seed {seed}: {status}: {detail}\n{program}"
