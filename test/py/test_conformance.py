"""The StableHLO interpreter's own tests, run through import -> xhlo -> verify -> run.

One run of the whole suite (2 worker processes, ~20-60 s) on the reference interpreter, shared
by the assertions: the pass rate over the functions run reaches 95%, every failure is a listed
expected failure, no listed expected failure passes, and the interpreter.run_parallel tests
are unsupported there. Every backend runs the suite too (`test_backend_kit.py`): it must pass
the same functions, and one that runs collectives the run_parallel tests as well.
"""

import os

import pytest

from mlirxla import conformance
from mlirxla.tools import conformance as conformance_tool

from .conftest import CONFORMANCE, CONFORMANCE_ABSENT, REPOSITORY

EXPECTED_FAILURES = os.path.join(REPOSITORY, "test", "conformance", "expected_failures.txt")
PASS_RATE_BAR = 0.95


@pytest.fixture(scope="module")
def suite() -> str:
    """The StableHLO interpreter suite, the one input from outside the repository."""
    if not os.path.isdir(CONFORMANCE):
        pytest.skip(CONFORMANCE_ABSENT)
    return CONFORMANCE


@pytest.fixture(scope="module")
def expected():
    return conformance.read_expected_failures(EXPECTED_FAILURES)


@pytest.fixture(scope="module")
def report(suite, expected):
    return conformance.run_suite(suite, expected_failures=expected, workers=2)


@pytest.mark.slow
def test_pass_rate(report):
    s = report.summary()
    assert report.pass_rate() >= PASS_RATE_BAR, s


@pytest.mark.slow
def test_every_failure_is_expected(report):
    unexpected = [f"{o.name}: {o.reason}" for o in report.unexpected_failures]
    assert not unexpected, "\n".join(unexpected)


@pytest.mark.slow
def test_no_expected_failure_passes(report, expected):
    assert not report.stale_expected, f"now passing, remove from {EXPECTED_FAILURES}: {report.stale_expected}"
    assert not report.unknown_expected, f"no such test function: {report.unknown_expected}"


@pytest.mark.slow
def test_run_parallel_files_are_unsupported_on_the_interpreter(report):
    """13 files call run_parallel from 38 test functions; the interpreter runs the other
    functions of those files (printing.mlir has chunks without collectives)."""
    unsupported = [o for o in report.outcomes if o.status == "unsupported"]
    assert len(report.run_parallel_files) == 13 and len(unsupported) == 38
    assert all(o.name.split(":@")[0] in report.run_parallel_files for o in unsupported)


def test_split_keeps_line_numbers():
    text = "a\n// -----\nb\nc\n// -----\nd\n"
    chunks = conformance.split_chunks(text)
    assert [line for line, _ in chunks] == [1, 2, 5]  # a chunk starts on its separator's line
    assert [chunk.splitlines().index(last) + 1 for chunk, last in zip([c for _, c in chunks], "acd")] == [1, 4, 6]


def test_crash_is_a_failure_and_the_worker_restarts(tmp_path):
    # ops the interpreter lacks are refused before they run, so kill the worker directly
    (tmp_path / "t.mlir").write_text(
        "func.func @ok() {\n  %0 = stablehlo.constant dense<1> : tensor<i64>\n"
        "  check.expect_eq_const %0, dense<1> : tensor<i64>\n  func.return\n}\n"
    )
    worker = conformance.Worker()
    try:
        case = conformance.collect(str(tmp_path))[0]
        assert worker.run(case, 60)[0] == "passed"
        worker.process.kill()
        worker.process.wait()
        assert worker.run(case, 60)[0] == "passed"  # restarted
    finally:
        worker.stop()


def test_without_the_suite_the_tool_says_where_to_get_it(tmp_path, monkeypatch, capsys):
    absent = str(tmp_path / "shared" / "conformance" / "stablehlo-interpret")
    monkeypatch.setattr(conformance_tool, "DEFAULT_DIRECTORY", absent)
    assert conformance_tool.main([]) == 2
    error = capsys.readouterr().err.splitlines()
    assert len(error) == 1
    assert error[0].startswith(f"mlirxla-conformance: error: {absent}: no StableHLO interpreter suite: ")
    assert "StableHLO repository's stablehlo/tests/interpret folder" in error[0]
