"""What one compile told its listeners, kept for a report or a profile.

A compile announces itself piece by piece on the thread it runs on (`mlirxla.phases`): the
front door's phase, the pipeline runner, the module after each changing pass, each compiled
kernel, and last the loaded executable. The recorder files these by thread into
`CompileRecord`s: a record opens with the first announcement on a thread that has none open
and closes with its executable (or when a second pipeline runner starts on that thread).
"""

import threading
from dataclasses import dataclass, field

from mlirxla import phases


@dataclass(frozen=True)
class ModuleSnapshot:
    """The module's text after the first `ledger_rows` pass runs (0: before the pipeline)."""

    ledger_rows: int
    text: str


@dataclass
class CompileRecord:
    runner: object | None = None  # pipelines.runner.PipelineRunner
    snapshots: list[ModuleSnapshot] = field(default_factory=list)
    kernel_sources: dict[str, str] = field(default_factory=dict)  # symbol -> its StableHLO kernel
    executable: object | None = None  # runtime.executable.Executable
    spans: list[tuple[phases.Phase, int]] = field(default_factory=list)  # (phase, end_ns), in the order they ended

    @property
    def module_name(self) -> str:
        return self.runner.name if self.runner is not None else "module"

    @property
    def plan(self):
        return self.executable.plan if self.executable is not None else None

    @property
    def start_ns(self) -> int:
        return min((phase.start_ns for phase, _ in self.spans), default=0)


class Recorder(phases.Listener):
    """Keeps a `CompileRecord` per compile it hears; with `keep_ir`, the module's text before
    the pipeline and after every pass that changed it (what the report's diffs show)."""

    def __init__(self, keep_ir: bool = False):
        self.keep_ir = keep_ir
        self.records: list[CompileRecord] = []
        self.open: dict[int, CompileRecord] = {}
        self.lock = threading.Lock()

    def record_here(self) -> CompileRecord:
        thread = threading.get_ident()
        with self.lock:
            if thread not in self.open:
                self.open[thread] = CompileRecord()
                self.records.append(self.open[thread])
            return self.open[thread]

    def close_here(self) -> None:
        with self.lock:
            self.open.pop(threading.get_ident(), None)

    def finished(self, phase: phases.Phase, end_ns: int) -> None:
        self.record_here().spans.append((phase, end_ns))

    def published(self, kind: str, value) -> None:
        if kind == "pipeline-runner":
            self.runner_started(value)
        elif kind == "module-changed":
            self.snapshot(self.record_here(), value)
        elif kind == "kernel":
            self.record_here().kernel_sources[value.symbol] = value.stablehlo
        elif kind == "executable":
            self.record_here().executable = value
            self.close_here()

    def runner_started(self, runner) -> None:
        record = self.record_here()
        if record.runner is not None:
            self.close_here()
            record = self.record_here()
        record.runner = runner
        self.snapshot(record, runner)

    def snapshot(self, record: CompileRecord, runner) -> None:
        if self.keep_ir and runner is record.runner:
            record.snapshots.append(ModuleSnapshot(len(runner.ledger.rows), runner.text()))

    def compiled(self) -> list[CompileRecord]:
        """The records of real compiles: those with a pipeline run or an executable (not, say,
        the reference interpreter's import for `--check`)."""
        return [record for record in self.records if record.runner is not None or record.executable is not None]
