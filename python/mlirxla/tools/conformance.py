"""mlirxla-conformance: run the StableHLO interpreter tests through import -> xhlo -> verify -> run.

    mlirxla-conformance                                  # ../shared/conformance/stablehlo-interpret
    mlirxla-conformance DIR -k add.mlir                  # only test functions whose name contains it
    mlirxla-conformance --json                           # a JSON report on stdout
    mlirxla-conformance --expected-failures FILE         # default: test/conformance/expected_failures.txt
    mlirxla-conformance --backend iree                   # compiled by IREE (the iree extra)

The suite is the StableHLO repository's stablehlo/tests/interpret folder; it is not part of
this repository (the default looks for it in a folder `shared` next to the clone). A backend
that fails more than the reference path lists its own failures beside the shared list
(`expected_failures.<backend>.txt`), which the default takes too.
Each test function runs isolated in a worker subprocess. Functions that use
interpreter.run_parallel (collectives across devices) run on a grid of devices with a backend
that runs collectives (cpu); the reference interpreter reports them as unsupported.
On a terminal, a progress bar with the counts so far runs on stderr (failures are printed
above it); piped output has none. Exit status 0 when no failure is unexpected and no expected
failure passes, 1 otherwise, 2 on bad input.
"""

import argparse
import json
import os
import sys

from mlirxla import conformance
from mlirxla.backends import registry
from mlirxla.errors import MlirxlaError
from mlirxla.report import progress as progress_bar

from .cli import EXIT_CHECK_FAILED, EXIT_OK, add_iree_flag_argument, iree_flags, run_tool

_REPOSITORY = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
DEFAULT_DIRECTORY = os.path.join(os.path.dirname(_REPOSITORY), "shared", "conformance", "stablehlo-interpret")
WHERE_TO_GET_THE_SUITE = (
    "get the StableHLO repository's stablehlo/tests/interpret folder (https://github.com/openxla/stablehlo) "
    "and pass its path, or put it there"
)
DEFAULT_EXPECTED = os.path.join(_REPOSITORY, "test", "conformance", "expected_failures.txt")


def backend_expected_failures(backend: str) -> str:
    """The failures one backend adds to the shared list."""
    return os.path.join(_REPOSITORY, "test", "conformance", f"expected_failures.{backend}.txt")


def parse_arguments(argv):
    parser = argparse.ArgumentParser(prog="mlirxla-conformance", description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", default=DEFAULT_DIRECTORY, help="directory of interpreter test files (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="print a JSON report instead of text")
    parser.add_argument("-k", dest="filter", help="run only test functions whose 'file.mlir:@function' contains this")
    parser.add_argument("--expected-failures", default=None,
                        help=f"expected-failures file (default: {DEFAULT_EXPECTED} and the backend's own "
                             "expected_failures.<backend>.txt beside it, when present; 'none' for none)")
    parser.add_argument("-j", "--workers", type=int, default=conformance.DEFAULT_WORKERS, help="worker processes (default %(default)s)")
    parser.add_argument("--timeout", type=float, default=conformance.DEFAULT_TIMEOUT, help="seconds per test function (default %(default)s)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every outcome, not only failures")
    parser.add_argument("--pipeline", help="run this pipeline (a name such as 'simplification', or pipeline text) on each module before executing it")
    parser.add_argument("--backend", choices=registry.names(), default="reference",
                        help="the backend that compiles each test function: reference (the StableHLO reference "
                             "interpreter, the default), cpu or iree")
    add_iree_flag_argument(parser)
    arguments = parser.parse_args(argv)
    arguments.iree_flags = iree_flags(arguments)
    return arguments


def expected_failures_paths(argument: str | None, backend: str) -> list[str]:
    if argument == "none":
        return []
    if argument is None:
        return [path for path in (DEFAULT_EXPECTED, backend_expected_failures(backend)) if os.path.exists(path)]
    return [argument]


def read_expected_failures(paths: list[str]) -> dict[str, str]:
    expected = {}
    for path in paths:
        try:
            expected |= conformance.read_expected_failures(path)
        except OSError as error:
            raise MlirxlaError(f"cannot read expected failures: {error.strerror}", path) from None
        except ValueError as error:
            raise MlirxlaError(str(error)) from None
    return expected


def run(argv) -> int:
    arguments = parse_arguments(argv)
    if not os.path.isdir(arguments.directory):
        if arguments.directory == DEFAULT_DIRECTORY:
            raise MlirxlaError(f"no StableHLO interpreter suite: {WHERE_TO_GET_THE_SUITE}", DEFAULT_DIRECTORY)
        raise MlirxlaError("not a directory", arguments.directory)
    paths = expected_failures_paths(arguments.expected_failures, arguments.backend)
    expected = read_expected_failures(paths)

    bar = None  # on a terminal, a progress bar on stderr (progress.Bar)

    def start_bar(total: int) -> None:
        nonlocal bar
        if not arguments.json:
            bar = progress_bar.Bar(total)

    def progress(outcome):
        if arguments.json:
            return
        bar.add("failed" if outcome.status == "failed" and not outcome.expected else
                "xfailed" if outcome.status == "failed" else outcome.status)
        if outcome.status == "failed" and not outcome.expected:
            bar.above(f"FAIL {outcome.name}: {outcome.reason}")
        elif arguments.verbose:
            tag = {"passed": "PASS", "failed": "XFAIL", "unsupported": "UNSUPPORTED"}[outcome.status]
            bar.above(f"{tag} {outcome.name}" + (f": {outcome.reason}" if outcome.reason else ""))

    if arguments.pipeline:
        conformance.pipeline_from(arguments.pipeline)  # refuse a bad pipeline before any worker starts
    try:
        report = conformance.run_suite(
            arguments.directory, arguments.filter, expected, arguments.workers, arguments.timeout, progress, arguments.pipeline,
            arguments.backend, arguments.iree_flags, on_total=start_bar,
        )
    finally:
        if bar is not None:
            bar.close()
    if arguments.json:
        print(json.dumps(report.to_json(), indent=1))
    else:
        print_report(report, paths)
    return EXIT_OK if report.ok else EXIT_CHECK_FAILED


def print_report(report: conformance.Report, expected_paths: list[str]) -> None:
    for name in report.stale_expected:
        print(f"XPASS {name}: listed as an expected failure but passed")
    for name in report.unknown_expected:
        print(f"note: expected failure {name} names no test function")
    s = report.summary()
    run_count = s["passed"] + s["failed"]
    print(
        f"{s['total']} test functions: {s['passed']} passed, {s['failed']} failed "
        f"({s['failed_expected']} expected, {s['failed_unexpected']} unexpected), {s['unsupported']} unsupported"
    )
    print(f"pass rate (functions run): {s['passed']}/{run_count} = {100 * report.pass_rate():.1f}%")
    if report.run_parallel_files:
        how = "not run: this backend runs no collectives" if s["unsupported"] else "run on a grid of devices"
        print(f"{len(report.run_parallel_files)} files use interpreter.run_parallel ({how}): {', '.join(report.run_parallel_files)}")
    if report.stale_expected:
        print(f"{len(report.stale_expected)} expected failures now pass: remove them from {' or '.join(expected_paths)}")
    print(f"{s['seconds']} s")


def main(argv=None) -> int:
    return run_tool("mlirxla-conformance", lambda: run(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
