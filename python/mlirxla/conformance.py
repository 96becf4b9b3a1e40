"""Run the StableHLO interpreter's own tests through mlirxla: import -> xhlo -> verify -> run.

Each test file holds test functions (public, no arguments) in chunks separated by
`// -----`; each function states its expectations with `check` ops. Every function runs in
isolation in a persistent worker subprocess (the reference interpreter aborts the process on
what it cannot evaluate); a worker that dies is restarted and the function it was running is
recorded as a failure with the worker's last words as the reason.

A test whose chunk calls `interpreter.run_parallel` runs its programs on a grid of devices
(`parallel_harness.py`) on a backend that runs collectives (`Backend.runs_collectives`); on
the others (the reference interpreter aborts on collectives) it is reported as unsupported.

Outcomes: passed, failed (the reason), unsupported. A failure listed in
the expected-failures file (lines `file.mlir:@function  reason`) is an expected failure.
"""

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field

from .split_input import split_chunks

TEST_FUNCTION = re.compile(r"^\s*func\.func\s+(?:public\s+)?@([\w$.-]+)\s*\(\s*\)", re.MULTILINE)
FUNCTION_START = re.compile(r"^\s*func\.func\b", re.MULTILINE)
RUN_PARALLEL = "interpreter.run_parallel"
DEFAULT_TIMEOUT = 120.0
DEFAULT_WORKERS = 2


@dataclass(frozen=True)
class TestCase:
    """One test function: `file` (relative to the suite directory) and its chunk's text."""

    file: str
    function: str
    chunk: int
    line: int
    text: str = field(repr=False)
    run_parallel: bool = False
    occurrence: int = 1  # a function name repeated in later chunks of the file: 2, 3, ...

    @property
    def name(self) -> str:
        """`file.mlir:@function`, with `#N` for the N-th function of that name in the file."""
        return f"{self.file}:@{self.function}" + (f"#{self.occurrence}" if self.occurrence > 1 else "")


@dataclass
class Outcome:
    name: str
    status: str  # passed | failed | unsupported
    reason: str = ""
    expected: bool = False  # a failure listed in the expected-failures file
    seconds: float = 0.0


@dataclass
class Report:
    outcomes: list[Outcome]
    run_parallel_files: list[str]
    seconds: float
    stale_expected: list[str]  # listed as expected failures but passed
    unknown_expected: list[str]  # listed but no such test function

    def count(self, status: str, expected: bool | None = None) -> int:
        return sum(1 for o in self.outcomes if o.status == status and (expected is None or o.expected == expected))

    @property
    def unexpected_failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "failed" and not o.expected]

    @property
    def ok(self) -> bool:
        return not self.unexpected_failures and not self.stale_expected

    def pass_rate(self) -> float:
        """Passed over the functions run."""
        run = self.count("passed") + self.count("failed")
        return self.count("passed") / run if run else 1.0

    def summary(self) -> dict:
        return {
            "total": len(self.outcomes),
            "passed": self.count("passed"),
            "failed": self.count("failed"),
            "failed_expected": self.count("failed", True),
            "failed_unexpected": self.count("failed", False),
            "unsupported": self.count("unsupported"),
            "run_parallel_files": len(self.run_parallel_files),
            "pass_rate": round(self.pass_rate(), 4),
            "stale_expected_failures": len(self.stale_expected),
            "seconds": round(self.seconds, 1),
        }

    def to_json(self) -> dict:
        return {
            "summary": self.summary(),
            "run_parallel_files": self.run_parallel_files,
            "stale_expected_failures": self.stale_expected,
            "unknown_expected_failures": self.unknown_expected,
            "outcomes": [asdict(o) for o in self.outcomes],
        }


# --------------------------------------------------------------------------- collection


def test_files(directory: str) -> list[str]:
    found = []
    for root, _dirs, files in os.walk(directory):
        found += [os.path.relpath(os.path.join(root, f), directory) for f in files if f.endswith(".mlir")]
    return sorted(found)


def function_text(text: str, header: re.Match) -> str:
    """The text of the function whose header `header` matched, up to the next function."""
    following = FUNCTION_START.search(text, header.end())
    return text[header.start():following.start() if following else len(text)]


def collect(directory: str, filter_text: str | None = None) -> list[TestCase]:
    cases = []
    for relative in test_files(directory):
        with open(os.path.join(directory, relative), encoding="utf-8") as handle:
            text = handle.read()
        seen: dict[str, int] = {}
        for index, chunk in enumerate(split_chunks(text)):
            parallel = RUN_PARALLEL in chunk.text
            for match in TEST_FUNCTION.finditer(chunk.text):
                if parallel and RUN_PARALLEL not in function_text(chunk.text, match):
                    continue  # a program run_parallel runs on its devices, not a test on its own
                seen[match.group(1)] = seen.get(match.group(1), 0) + 1
                line_number = chunk.text.count("\n", 0, match.start()) + 1
                case = TestCase(relative, match.group(1), index, line_number, chunk.text, parallel, seen[match.group(1)])
                if filter_text is None or filter_text in case.name:
                    cases.append(case)
    return cases


def read_expected_failures(path: str | None) -> dict[str, str]:
    """`file.mlir:@function  reason` lines (# comments, blank lines ignored) -> {name: reason}."""
    if not path:
        return {}
    expected = {}
    with open(path, encoding="utf-8") as handle:
        for number, raw in enumerate(handle, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            name, _, reason = line.partition(" ")
            if ":@" not in name:
                raise ValueError(f"{path}:{number}: expected 'file.mlir:@function  reason', got {line!r}")
            expected[name] = reason.strip()
    return expected


# --------------------------------------------------------------------------- the worker


def pipeline_from(spec: str):
    """A named pipeline (`simplification`) or a textual one (`xhlo-algsimp,cse`)."""
    from mlirxla.pipelines import NAMED_PIPELINES, named_pipeline
    from mlirxla.pipelines.text import parse_pipeline

    return named_pipeline(spec) if spec in NAMED_PIPELINES else parse_pipeline(spec)


def suite_options(backend: str, iree_flags: tuple[str, ...] = ()):
    """Backends run the suite without constant folding: every test function's inputs are
    constants, and the folder (which evaluates on the reference interpreter) would otherwise
    compute the results instead of the backend's code. Kernels keep gradual underflow (not
    XLA:CPU's flushing, `backends/cpu/denormal_flushing.py`): the expected values are the
    interpreter's IEEE ones, denormal operands among them."""
    from mlirxla.pipelines.runner import RunOptions

    return RunOptions(disable_passes=frozenset({"xhlo-constant-folding"}), backend=backend, iree_flags=tuple(iree_flags),
                      flush_denormals=False)


def run_case(text: str, source: str, entry: str, pipeline: str | None = None, backend: str = "reference",
             iree_flags: tuple[str, ...] = ()) -> tuple[str, str]:
    """Import `text`, optionally run `pipeline` over it, run `entry` compiled by `backend`
    (the reference interpreter by default, with `iree_flags` for iree), judge its checks."""
    from mlirxla import frontdoor, parallel_harness
    from mlirxla.context import new_context
    from mlirxla.errors import MlirxlaError
    from mlirxla.mlir import ir
    from mlirxla.runtime import checks, driver

    try:
        options = suite_options(backend, iree_flags)
        if RUN_PARALLEL in text:
            verdicts = checks.judge(parallel_harness.run(text, source, entry, options, backend))
        else:
            context = new_context()
            imported = frontdoor.import_text(text, source, context)
            if pipeline:
                from mlirxla.pipelines.runner import PipelineRunner

                PipelineRunner(imported.module).run(pipeline_from(pipeline))
            with context, ir.Location.unknown():
                verdicts = checks.judge(driver.execute(imported.module, [], entry, options, backend=backend))
    except MlirxlaError as error:
        return "failed", str(error)
    except Exception as error:  # a bug in mlirxla: still a one-line reason
        return "failed", f"internal error: {type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
    if not verdicts:
        return "passed", "no checks"
    not_judged = [v for v in verdicts if not v.judged]
    failures = [v for v in verdicts if v.judged and not v.passed]
    if failures:
        first = failures[0]
        return "failed", f"{len(failures)} of {len(verdicts)} checks failed; first: {first.check.name} at {first.check.location}: {first.detail}"
    if not_judged:
        first = not_judged[0]
        return "failed", f"{first.check.name} not judged: {first.detail}"
    return "passed", ""


def worker_main() -> int:
    """Serve requests (one JSON line each on stdin) with one JSON line each on the protocol fd.

    The interpreter may print (stablehlo printing ops) on stdout: the protocol goes through a
    duplicate of the original stdout, and fd 1 is pointed at stderr.
    """
    import warnings

    warnings.simplefilter("ignore")  # numpy's nan/inf warnings are no outcome
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        request = json.loads(line)
        start = time.monotonic()
        status, reason = run_case(request["text"], request["source"], request["entry"], request.get("pipeline"),
                                  request.get("backend", "reference"), tuple(request.get("iree_flags", ())))
        protocol.write(json.dumps({"status": status, "reason": reason, "seconds": time.monotonic() - start}) + "\n")
    return 0


class Worker:
    """A persistent worker subprocess; restarted after it dies or times out."""

    def __init__(self):
        self.process = None
        self.stderr_tail: deque[str] = deque(maxlen=20)
        self.reader = None

    def start(self):
        self.stderr_tail = deque(maxlen=20)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mlirxla.conformance", "--worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
        )
        tail, stream = self.stderr_tail, self.process.stderr
        self.reader = threading.Thread(target=lambda: [tail.append(l.rstrip("\n")) for l in stream], daemon=True)
        self.reader.start()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self):
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.reader.join(timeout=5)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            try:
                stream.close()
            except OSError:
                pass
        self.process = None

    def crash_reason(self, code: int) -> str:
        self.reader.join(timeout=5)
        lines = [l.strip() for l in self.stderr_tail if l.strip()]
        errors = [l for l in lines if "ERROR" in l or "error" in l or "Assertion" in l]
        if code < 0:
            try:
                how = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"killed by signal {-code}"
        else:
            how = f"exit status {code}"
        return f"worker crashed ({how})" + (f": {errors[-1]}" if errors else "")

    def run(self, case: TestCase, timeout: float, pipeline: str | None = None, backend: str = "reference",
            iree_flags: tuple[str, ...] = ()) -> tuple[str, str, float]:
        if not self.alive():
            self.stop()
            self.start()
        start = time.monotonic()
        request = json.dumps({"text": case.text, "source": case.file, "entry": case.function, "pipeline": pipeline, "backend": backend,
                              "iree_flags": list(iree_flags)})
        answer: list[str] = []
        try:
            self.process.stdin.write(request + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        reader = threading.Thread(target=lambda: answer.append(self.process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        elapsed = time.monotonic() - start
        if reader.is_alive():
            self.process.kill()
            self.stop()
            return "failed", f"timed out after {timeout:.0f} s", elapsed
        if not answer or not answer[0]:
            reason = self.crash_reason(self.process.wait())
            self.stop()
            return "failed", reason, elapsed
        reply = json.loads(answer[0])
        return reply["status"], reply["reason"], elapsed


# --------------------------------------------------------------------------- the runner


def run_suite(
    directory: str,
    filter_text: str | None = None,
    expected_failures: dict[str, str] | None = None,
    workers: int = DEFAULT_WORKERS,
    timeout: float = DEFAULT_TIMEOUT,
    progress=None,
    pipeline: str | None = None,
    backend: str = "reference",
    iree_flags: tuple[str, ...] = (),
    on_total=None,
) -> Report:
    """Run every test function of `directory` (run_parallel ones only on a backend that runs
    collectives), after `pipeline` (a named or textual pipeline) when one is given, compiled by `backend`
    (the reference interpreter by default; `iree_flags` for IREE's compiler). `on_total` hears how many functions will run
    (`progress` then hears each outcome)."""
    start = time.monotonic()
    expected_failures = expected_failures or {}
    from mlirxla.backends import registry
    from mlirxla.errors import MlirxlaError

    chosen = registry.backend(backend)
    unavailable = chosen.unavailable() or chosen.runs_elsewhere
    if unavailable is not None:  # once, not as the reason of every test's failure
        raise MlirxlaError(unavailable)
    cases = collect(directory, filter_text)
    runs_collectives = chosen.runs_collectives
    outcomes: dict[int, Outcome] = {}
    pending: queue.Queue = queue.Queue()
    for index, case in enumerate(cases):
        if case.run_parallel and not runs_collectives:
            outcomes[index] = Outcome(case.name, "unsupported", f"uses {RUN_PARALLEL}: the {backend} backend runs no collectives")
        else:
            pending.put(index)
    if on_total:
        on_total(pending.qsize())
    lock = threading.Lock()

    def serve():
        worker = Worker()
        try:
            while True:
                try:
                    index = pending.get_nowait()
                except queue.Empty:
                    return
                case = cases[index]
                status, reason, seconds = worker.run(case, timeout, pipeline, backend, iree_flags)
                outcome = Outcome(case.name, status, reason, status == "failed" and case.name in expected_failures, round(seconds, 3))
                with lock:
                    outcomes[index] = outcome
                    if progress:
                        progress(outcome)
        finally:
            worker.stop()

    threads = [threading.Thread(target=serve) for _ in range(max(1, min(workers, pending.qsize())))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    ordered = [outcomes[i] for i in range(len(cases))]
    names = {case.name for case in cases}
    stale = [o.name for o in ordered if o.status == "passed" and o.name in expected_failures]
    unknown = [] if filter_text else sorted(n for n in expected_failures if n not in names)
    parallel_files = sorted({case.file for case in cases if case.run_parallel})
    return Report(ordered, parallel_files, time.monotonic() - start, stale, unknown)


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        sys.exit(worker_main())
    sys.exit("usage: python -m mlirxla.conformance --worker (use mlirxla-conformance)")
