"""A profile of compiles and executions, as a Chrome trace (the trace-event JSON format that
Perfetto and chrome://tracing open) and a summary table of where the time went.

While a `Profile` records (`with recording() as profile:`, or `start()` and `stop()`), it
hears the phases of every compile (`mlirxla.phases`) and runs every thunk through itself
(`runtime.thunks.observe`). The trace then holds

- one complete event (`"ph": "X"`) per thunk run, on the thread that ran it (a pool worker
  when the executor runs the thunk graph in parallel), with its kind, what it calls (the
  kernel's symbol, the BLAS routine), its bytes in and out and its flops; a loop's or a
  conditional's thunks inside the event of their loop or conditional;
- one per execution, around its thunks, and one per compile phase: the front door, each
  pipeline, each pass run, the thunk emission, each kernel's compile (its lowering; its LLVM work
  runs on the compile threads);
- counters: the temp bytes buffer assignment keeps live at each thunk's op, and the bytes an
  execution allocates fresh (temp slab, outputs, kernel scratch) while it runs.

Flops are the thunk's op's, by XLA's cost analysis (`thunk_facts.py`), for executables whose
compile the profile heard; an executable loaded from the compile cache has no module, so
only its BLAS calls have flops.
"""

import atexit
import contextlib
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field

from mlirxla import phases
from mlirxla.errors import MlirxlaError
from mlirxla.runtime import thunks as thunk_kinds

from .units import human_seconds

TOP_KERNELS = 15
PHASE_NAMES = {"frontdoor": "import {}", "pipeline": "pipeline {}", "kernel": "compile {}"}


@dataclass(frozen=True)
class Measured:
    """A thunk's measured time over a profile: how often it ran and for how long in all."""

    calls: int
    total_s: float


@dataclass(frozen=True)
class ThunkInfo:
    """What a thunk's events say of it."""

    name: str
    kind: str
    category: str  # kernel | library | copy | control
    routine: str
    bytes_in: int
    bytes_out: int
    flops: float
    live_temp_bytes: int | None
    module: str

    @property
    def bytes(self) -> int:
        return self.bytes_in + self.bytes_out


@dataclass
class ExecutableInfo:
    module: str
    thunks: list  # the plan's thunk list (kept, so that its id stays its own)
    fresh_bytes: int
    infos: dict = field(default_factory=dict)  # id(thunk) -> ThunkInfo


@dataclass(frozen=True)
class KernelTime:
    """One row of the summary: a thunk of a module, over all its runs."""

    info: ThunkInfo
    calls: int
    total_ns: int

    @property
    def seconds(self) -> float:
        return self.total_ns / 1e9

    @property
    def gb_per_s(self) -> float:
        return self.info.bytes * self.calls / max(self.seconds, 1e-12) / 1e9

    @property
    def gflop_per_s(self) -> float:
        return self.info.flops * self.calls / max(self.seconds, 1e-12) / 1e9


def thunk_infos(plan_thunks: list, module_name: str, plan=None, module=None, assignment=None) -> dict:
    """id(thunk) -> ThunkInfo for every thunk (loops' and branches' included); with the
    optimized module, each thunk's flops and live temp bytes come from its op."""
    from .thunk_facts import flattened, thunk_facts, with_figures

    facts = None
    if plan is not None and module is not None:
        try:
            with module.context:
                facts = thunk_facts(plan, module, assignment)
        except Exception:  # the figures are a help, never a reason for a run to fail
            facts = None
    if facts is None:
        facts = with_figures(flattened(plan_thunks))
    return {id(fact.thunk): ThunkInfo(fact.name, fact.kind, fact.category, fact.routine, fact.bytes_in, fact.bytes_out,
                                      fact.flops, fact.live_temp_bytes, module_name) for fact in facts}


class Profile(phases.Listener):
    """The phases and thunk runs heard between `start()` and `stop()`."""

    def __init__(self):
        self.origin_ns = time.perf_counter_ns()
        self.wall_origin_ns = time.time_ns()  # the same instant on the wall clock (jax's profiler wants it)
        self.spans: list = []  # (phases.Phase, end_ns)
        self.thunk_runs: list = []  # (thunk, start_ns, end_ns, thread)
        self.executions: list = []  # (id(plan thunks), start_ns, end_ns, thread)
        self.executables: dict[int, ExecutableInfo] = {}  # id(plan thunks) -> its info
        self.runners: dict[int, object] = {}  # thread -> the pipeline runner compiling there
        self.thread_names: dict[int, str] = {}
        self.lock = threading.Lock()

    # ------------------------------------------------------------------ hearing compiles

    def finished(self, phase: phases.Phase, end_ns: int) -> None:
        self.spans.append((phase, end_ns))
        self.name_thread(phase.thread)

    def published(self, kind: str, value) -> None:
        if kind == "pipeline-runner":
            self.runners[threading.get_ident()] = value
        elif kind == "executable":
            self.add_executable(value, self.runners.pop(threading.get_ident(), None))

    def add_executable(self, executable, runner) -> ExecutableInfo:
        module_name = runner.name if runner is not None else "executable"
        module = runner.module if runner is not None else None
        report = runner.reports.get("xhlo-buffer-assignment") if runner is not None else None
        plan = executable.plan
        info = ExecutableInfo(module_name, plan.thunks, executable.fresh_bytes,
                              thunk_infos(plan.thunks, module_name, plan, module, report.assignment if report else None))
        with self.lock:
            self.executables[id(plan.thunks)] = info
        return info

    def executable_info(self, thunks: list) -> ExecutableInfo:
        """The info of the executable running `thunks`, made from the thunks alone for one
        compiled before the profile started."""
        info = self.executables.get(id(thunks))
        if info is None:
            info = ExecutableInfo("executable", thunks, 0, thunk_infos(thunks, "executable"))
            with self.lock:
                self.executables[id(thunks)] = info
        return info

    def name_thread(self, thread: int) -> None:
        if thread not in self.thread_names:
            name = threading.current_thread().name
            # a thread Python did not start (jax's, calling the PJRT plugin) is a "Dummy-N" to it
            self.thread_names[thread] = f"caller {name[6:]}" if name.startswith("Dummy-") else name

    # ------------------------------------------------------------------ the thunks observer

    def run(self, thunk, bases: list[int], pool) -> None:
        start = time.perf_counter_ns()
        try:
            thunk.run(bases, pool)
        finally:
            thread = threading.get_ident()
            self.thunk_runs.append((thunk, start, time.perf_counter_ns(), thread))
            if thread not in self.thread_names:
                self.name_thread(thread)

    def execution(self, thunks: list, run) -> None:
        self.executable_info(thunks)
        start = time.perf_counter_ns()
        try:
            run()
        finally:
            thread = threading.get_ident()
            self.executions.append((id(thunks), start, time.perf_counter_ns(), thread))
            self.name_thread(thread)

    # ------------------------------------------------------------------ reading it

    def infos(self) -> dict:
        """id(thunk) -> ThunkInfo, over every executable heard."""
        return {key: info for executable in list(self.executables.values()) for key, info in executable.infos.items()}

    def info_of(self, thunk, infos: dict) -> ThunkInfo:
        info = infos.get(id(thunk))
        if info is None:
            info = thunk_infos([thunk], "executable")[id(thunk)]
            infos[id(thunk)] = info
        return info

    def measured(self) -> dict:
        """id(thunk) -> Measured, for the report's thunk sequence."""
        totals: dict[int, list] = {}
        for thunk, start, end, _ in self.thunk_runs:
            total = totals.setdefault(id(thunk), [0, 0])
            total[0] += 1
            total[1] += end - start
        return {key: Measured(calls, ns / 1e9) for key, (calls, ns) in totals.items()}

    def kernel_times(self) -> list[KernelTime]:
        """Thunks (not loops or conditionals, whose time is their thunks') by total time, those
        of the same name in the same module together."""
        infos = self.infos()
        rows: dict[tuple, list] = {}
        for thunk, start, end, _ in self.thunk_runs:
            info = self.info_of(thunk, infos)
            if info.category == "control":
                continue
            row = rows.setdefault((info.module, info.name, info.kind, info.routine), [info, 0, 0])
            row[1] += 1
            row[2] += end - start
        return sorted((KernelTime(*row) for row in rows.values()), key=lambda row: -row.total_ns)

    def trace_events(self) -> list[dict]:
        """The events of the Chrome trace format: times in microseconds since the profile
        started; one process, a track per thread."""
        pid = os.getpid()
        tids: dict[int, int] = {}
        tid = lambda thread: tids.setdefault(thread, len(tids) + 1)
        us = lambda ns: (ns - self.origin_ns) / 1000
        events = []
        for phase, end in list(self.spans):
            name = PHASE_NAMES.get(phase.category, "{}").format(phase.name)
            events.append({"name": name, "cat": f"compile,{phase.category}", "ph": "X", "ts": us(phase.start_ns),
                           "dur": (end - phase.start_ns) / 1000, "pid": pid, "tid": tid(phase.thread),
                           "args": {"category": phase.category, "name": phase.name}})
        for number, (key, start, end, thread) in enumerate(list(self.executions)):
            executable = self.executables.get(key)
            module = executable.module if executable else "executable"
            events.append({"name": f"execute {module}", "cat": "execution", "ph": "X", "ts": us(start),
                           "dur": (end - start) / 1000, "pid": pid, "tid": tid(thread),
                           "args": {"module": module, "execution": number}})
            if executable and executable.fresh_bytes:
                events.append(counter("execution bytes", us(start), executable.fresh_bytes, pid))
                events.append(counter("execution bytes", us(end), 0, pid))
        infos = self.infos()
        for thunk, start, end, thread in list(self.thunk_runs):
            info = self.info_of(thunk, infos)
            events.append({"name": info.name, "cat": f"thunk,{info.kind}", "ph": "X", "ts": us(start),
                           "dur": (end - start) / 1000, "pid": pid, "tid": tid(thread),
                           "args": {"kind": info.kind, "kernel": info.routine, "bytes_in": info.bytes_in,
                                    "bytes_out": info.bytes_out, "flops": info.flops, "module": info.module,
                                    "worker": self.thread_names.get(thread, str(thread))}})
            if info.live_temp_bytes is not None:
                events.append(counter("live temp bytes", us(start), info.live_temp_bytes, pid))
        events.sort(key=lambda event: event["ts"])
        metadata = [{"name": "process_name", "ph": "M", "ts": 0, "pid": pid, "tid": 0, "args": {"name": "mlirxla"}}]
        for thread, number in tids.items():
            metadata.append({"name": "thread_name", "ph": "M", "ts": 0, "pid": pid, "tid": number,
                             "args": {"name": self.thread_names.get(thread, f"thread {thread}")}})
        return metadata + events

    def trace(self) -> dict:
        return {"traceEvents": self.trace_events(), "displayTimeUnit": "ns",
                "otherData": {"producer": "mlirxla", "wall_clock_origin_ns": self.wall_origin_ns}}

    def write_trace(self, path: str) -> None:
        try:
            with open(path, "w") as handle:
                json.dump(self.trace(), handle)
        except OSError as error:
            raise MlirxlaError(f"cannot write the profile: {error.strerror}", path) from None

    def summary(self, top: int = TOP_KERNELS) -> str:
        """The top thunks by time with their achieved bandwidth and flop rate."""
        rows = self.kernel_times()
        total = sum(row.total_ns for row in rows)
        by_category: dict[str, int] = {}
        for row in rows:
            by_category[row.info.category] = by_category.get(row.info.category, 0) + row.total_ns
        shares = ", ".join(f"{category} {100 * ns / max(total, 1):.0f}%" for category, ns in
                           sorted(by_category.items(), key=lambda item: -item[1]))
        lines = [f"mlirxla profile: {len(self.executions)} execution(s), {len(self.thunk_runs)} thunk runs, "
                 f"{human_seconds(total / 1e9)} in thunks" + (f" ({shares})" if shares else "")]
        if not rows:
            return lines[0] + "\n"
        lines.append(f"  {'time':>9} {'share':>6} {'calls':>6} {'per call':>9} {'GB/s':>7} {'GFLOP/s':>8}  "
                     f"{'kind':<13} thunk (calls into)")
        for row in rows[:top]:
            routine = f" ({row.info.routine})" if row.info.routine and row.info.routine != row.info.name else ""
            flops = f"{row.gflop_per_s:8.2f}" if row.info.flops else f"{'-':>8}"
            lines.append(f"  {human_seconds(row.seconds):>9} {100 * row.total_ns / max(total, 1):5.1f}% {row.calls:>6} "
                         f"{human_seconds(row.seconds / row.calls):>9} {row.gb_per_s:7.2f} {flops}  "
                         f"{row.info.kind:<13} {row.info.name}{routine}")
        if len(rows) > top:
            rest = sum(row.total_ns for row in rows[top:])
            lines.append(f"  {human_seconds(rest / 1e9):>9} {100 * rest / max(total, 1):5.1f}%  in {len(rows) - top} more")
        return "\n".join(lines) + "\n"


def counter(name: str, ts: float, value: int, pid: int) -> dict:
    return {"name": name, "cat": "memory", "ph": "C", "ts": ts, "pid": pid, "tid": 0, "args": {"bytes": value}}


# ---------------------------------------------------------------------- recording

def start() -> Profile:
    """Start recording every compile's phases and every thunk run in this process."""
    if thunk_kinds.observer() is not None:
        raise MlirxlaError("a profile is recording already")
    profile = Profile()
    phases.add_listener(profile)
    thunk_kinds.observe(profile)
    return profile


def stop(profile: Profile) -> Profile:
    if thunk_kinds.observer() is profile:
        thunk_kinds.observe(None)
    phases.remove_listener(profile)
    return profile


def recording_now() -> Profile | None:
    """The profile recording in this process, if one is."""
    observer = thunk_kinds.observer()
    return observer if isinstance(observer, Profile) else None


@contextlib.contextmanager
def recording():
    profile = start()
    try:
        yield profile
    finally:
        stop(profile)


ENVIRONMENT = "MLIRXLA_PROFILE"
_from_environment: Profile | None = None


def record_from_environment() -> Profile | None:
    """With MLIRXLA_PROFILE=DIR set, record this whole process (the PJRT plugin calls this when
    jax creates its client): at exit the trace goes to DIR/mlirxla-<pid>.trace.json and the
    summary to stderr."""
    global _from_environment
    directory = os.environ.get(ENVIRONMENT)
    if not directory or _from_environment is not None:
        return _from_environment
    _from_environment = start()
    atexit.register(finish_environment_profile, _from_environment, directory)
    return _from_environment


def environment_trace_path(directory: str) -> str:
    return os.path.join(directory, f"mlirxla-{os.getpid()}.trace.json")


def finish_environment_profile(profile: Profile, directory: str) -> None:
    stop(profile)
    path = environment_trace_path(directory)
    try:
        os.makedirs(directory, exist_ok=True)
        profile.write_trace(path)
    except (OSError, MlirxlaError) as error:
        print(f"mlirxla: cannot write the profile to {path}: {error}", file=sys.stderr)
        return
    sys.stderr.write(profile.summary())
    print(f"mlirxla: profile written to {path} (open it in https://ui.perfetto.dev or chrome://tracing)", file=sys.stderr)
