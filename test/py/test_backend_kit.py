"""The conformance kit every registered backend inherits (`backends/registry.py`): the JAX
sample programs compiled by the backend compute what the StableHLO reference interpreter
computes, and the interpreter suite compiled by it passes exactly what the reference backend
passes, less the failures it lists of its own (`expected_failures.<backend>.txt`). A new
backend is tested by being registered; one whose optional package is missing here is skipped
with the reason it gives."""

import functools
import os

import numpy as np
import pytest

from mlirxla import conformance, frontdoor
from mlirxla.backends import registry
from mlirxla.context import new_context
from mlirxla.runtime import driver, literals

from mlirxla.tools.conformance import backend_expected_failures, expected_failures_paths, read_expected_failures

from .conftest import CONFORMANCE, CONFORMANCE_ABSENT, JAX_PROGRAMS, backends, random_arguments, reference_outputs
from .test_samples import RUNNABLE


@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("name", RUNNABLE)
def test_sample_matches_the_interpreter(name, backend):
    """Float arguments scaled down, so that the recurrent samples do not amplify the rounding
    of another summation order; a refusal fails."""
    module = frontdoor.import_file(os.path.join(JAX_PROGRAMS, name), new_context()).module
    arguments = [a * a.dtype.type(0.1) if np.issubdtype(a.dtype, np.floating) else a for a in random_arguments(module, 7)]
    expected = reference_outputs(module, arguments)
    with module.context:
        got = [literals.to_numpy(v) for v in driver.execute(module, arguments, backend=backend).outputs]
    assert len(got) == len(expected)
    for index, (have, want) in enumerate(zip(got, expected)):
        assert have.dtype == want.dtype and have.shape == want.shape, index
        if np.issubdtype(want.dtype, np.floating):
            np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-5, err_msg=f"output {index}")
        else:
            np.testing.assert_array_equal(have, want, err_msg=f"output {index}")


@functools.cache
def suite_report(backend: str):
    expected = read_expected_failures(expected_failures_paths(None, backend))
    return conformance.run_suite(CONFORMANCE, expected_failures=expected, workers=2, backend=backend)


def own_expected_failures(backend: str) -> set[str]:
    path = backend_expected_failures(backend)
    return set(conformance.read_expected_failures(path)) if os.path.exists(path) else set()


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir(CONFORMANCE), reason=CONFORMANCE_ABSENT)
@pytest.mark.parametrize("backend", backends())
def test_suite_passes_what_the_reference_backend_passes(backend):
    report, baseline = suite_report(backend), suite_report("reference")
    unexpected = [f"{o.name}: {o.reason}" for o in report.unexpected_failures]
    assert not unexpected, "\n".join(unexpected)
    collective = set(report.run_parallel_files)
    passed = lambda r: {o.name for o in r.outcomes if o.status == "passed" and o.name.split(":@")[0] not in collective}
    assert passed(report) == passed(baseline) - own_expected_failures(backend)


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir(CONFORMANCE), reason=CONFORMANCE_ABSENT)
@pytest.mark.parametrize("backend", backends([name for name in registry.names() if registry.backend(name).runs_collectives]))
def test_collective_tests_pass_on_a_grid_of_devices(backend):
    """The suite's interpreter.run_parallel tests (all_reduce, all_gather, all_to_all,
    collective_permute, collective_broadcast, reduce_scatter, send/recv, infeed/outfeed,
    replica and partition ids) run on a device grid and pass."""
    report = suite_report(backend)
    collective = [o for o in report.outcomes if o.name.split(":@")[0] in report.run_parallel_files]
    assert len(report.run_parallel_files) == 13 and collective
    failed = [f"{o.name}: {o.status} {o.reason}" for o in collective if o.status != "passed"]
    assert not failed, "\n".join(failed)
