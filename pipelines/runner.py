"""Run pipelines and keep the books (XLA's HloPassPipeline, done in the open).

For every pass the runner decides whether it runs (`--disable-passes`, `--enable-passes-only`:
exact names, a pipeline's name covering all its passes), times it, counts ops before and
after (when reports are rendered: nobody reads the counts otherwise), and writes a ledger
row. With `verify_each` (`mlirxla-opt`'s default, and everywhere with
`MLIRXLA_VERIFY_EACH=1`, which the test suite sets) it runs the invariant checker (the xhlo
verifier) after each pass that changed the module; a failure names the pass and pipeline
and, when dumping, keeps the module from before and after the pass. Without it (a compile
through the client or the plugin) the checker runs once, when the outermost pipeline changed
the module, and a failure names the pipeline: the verifier runs a Python check per op, and
running it after every changing pass was a tenth of a cold compile (XLA's C++ HloVerifier
costs little by comparison); the import verified the module before the pipeline. It dumps
in XLA's grammar when a pass changed the module and the dump regexes match (`--dump-pass-re` on the pass name,
`--dump-pipeline-re` on the pipeline name, `--dump-module-re` on the module name, all
partial matches), and prints the IR after passes for `--print-ir-after-all/-change`.
In debug mode (`check_changed_flag`) it fingerprints the module around each pass to catch a
pass whose `changed` flag is wrong.

A pass that reports on its run returns its report with its `changed` flag (`PassResult`); the
runner keeps the last report of each pass by name (`reports`, for `--explain-fusion` and the
tests) and, when dumping, writes the report's files.

Every pass runs inside the erasure books (`transforms/erasure.py`): an exception escaping a
pass becomes an error naming the pass and the op it was processing, and with `check_erasure`
(`--check-erasure`, `MLIRXLA_CHECK_ERASURE=1`) a pass that touches an op it erased fails by
name instead of reading freed memory.
"""

import os
import re
import sys
import time
from dataclasses import dataclass, field
from typing import TextIO

from mlirxla import phases, printing
from mlirxla.errors import MlirxlaError
from mlirxla.mlir import ir
from mlirxla.transforms import erasure
from mlirxla.transforms.pass_base import ModulePass, PassReport, PassResult, count_ops, reports_rendered
from mlirxla.transforms.verifier import verify_module

from .dumps import DumpWriter, module_name
from .ledger import Ledger, LedgerRow
from .pipeline import FixedPoint, Pipeline, step_name


@dataclass(frozen=True)
class RunOptions:
    """Everything that steers a pipeline run; the command-line flags map one to one."""

    disable_passes: frozenset[str] = frozenset()
    enable_passes_only: frozenset[str] | None = None
    dump_to: str | None = None
    dump_pass_re: str | None = None  # per-pass dumps only when set (as XLA)
    dump_pipeline_re: str | None = None
    dump_module_re: str | None = None
    # the invariant checker after every changing pass; else once after the outermost pipeline
    verify_each: bool = field(default_factory=lambda: verifying_each_by_default())
    check_changed_flag: bool = False  # debug: a pass's `changed` must match the module's text
    check_erasure: bool = field(default_factory=erasure.checking_by_default)
    # render the reports that name values (layout, copies, schedule) even when not dumping:
    # a compile through the client or the plugin turns it off (naming values costs a printing)
    render_reports: bool = True
    print_ir_after_all: bool = False
    print_ir_after_change: bool = False
    print_stream: TextIO | None = None
    backend: str = "cpu"
    iree_flags: tuple[str, ...] = ()  # passed to iree-compile by the iree backend (after its own)
    allow_excess_precision: bool | None = None  # the cpu backend's bf16 in f32 (None: MLIRXLA_ALLOW_EXCESS_PRECISION)
    flush_denormals: bool | None = None  # the cpu backend's kernels flush denormals (None: MLIRXLA_FLUSH_DENORMALS)

    def __post_init__(self):
        if self.disable_passes and self.enable_passes_only is not None:
            raise MlirxlaError("--disable-passes and --enable-passes-only cannot be used together")
        for flag, pattern in (("--dump-pass-re", self.dump_pass_re), ("--dump-pipeline-re", self.dump_pipeline_re), ("--dump-module-re", self.dump_module_re)):
            if pattern is not None:
                try:
                    re.compile(pattern)
                except re.error as error:
                    raise MlirxlaError(f"{flag}: invalid regular expression '{pattern}': {error}") from None


@dataclass
class RunResult:
    """What a run did: whether the module changed, the ledger, the dump files written, the
    last report of each pass that has one."""

    changed: bool
    ledger: Ledger
    dump_files: list[str] = field(default_factory=list)
    reports: dict[str, PassReport] = field(default_factory=dict)


def verifying_each_by_default() -> bool:
    return os.environ.get("MLIRXLA_VERIFY_EACH", "") not in ("", "0")


def matches(pattern: str | None, name: str) -> bool:
    return pattern is None or re.search(pattern, name) is not None


class PipelineRunner:
    """Runs one module through pipelines under `RunOptions`."""

    def __init__(self, module: ir.Module, options: RunOptions = RunOptions(), dumps: DumpWriter | None = None):
        self.module = module
        self.options = options
        self.name = module_name(module)
        dump_directory = options.dump_to if matches(options.dump_module_re, self.name) else None
        self.dumps = dumps or DumpWriter(dump_directory, self.name)
        self.ledger = Ledger([])
        # the module's op count after the last pass (the ledger's next "before"); a walk over
        # every op per count, so a pass that did not change the module is not counted again
        self.ops_counted: int | None = None
        self.reports: dict[str, PassReport] = {}  # pass name -> the report of its last run
        phases.publish("pipeline-runner", self)

    # ------------------------------------------------------------------ entry points

    def compile(self, pipeline: Pipeline) -> RunResult:
        """before_optimizations dump, the pipeline, `<backend>_after_optimizations`, the ledger file."""
        dumping = self.dumps.directory is not None  # printing the module costs as much as a pass
        if dumping:
            self.dumps.write("before_optimizations.mlir", self.text())
        changed = self.run(pipeline)
        if dumping:
            self.dumps.write(f"{self.options.backend}_after_optimizations.mlir", self.text())
            self.dumps.write("pass-ledger.tsv", self.ledger.tsv())
        return RunResult(changed, self.ledger, list(self.dumps.written), dict(self.reports))

    def run(self, pipeline: Pipeline) -> bool:
        self.ops_counted = None  # the module may have changed since the last run
        with phases.phase("pipeline", pipeline.name):
            changed = self.run_pipeline(pipeline, enabled_by_parent=False)
            if changed and not self.options.verify_each:
                self.check_pipeline_invariants(pipeline.name)
            return changed

    # ------------------------------------------------------------------ steps

    def run_pipeline(self, pipeline: Pipeline, enabled_by_parent: bool, iteration: int = 0) -> bool:
        """Run `pipeline`'s steps; `iteration` numbers the rounds of an enclosing fixed point."""
        if pipeline.name in self.options.disable_passes:
            return False
        enabled = enabled_by_parent or self.enabled_explicitly(pipeline.name)
        if not pipeline.steps:
            return False
        self.dump_step(pipeline.name, "pipeline-start", step_name(pipeline.steps[0]), always=True)
        changed = False
        for index, step in enumerate(pipeline.steps):
            following = step_name(pipeline.steps[index + 1]) if index + 1 < len(pipeline.steps) else "pipeline-end"
            if self.run_step(step, pipeline.name, enabled, iteration):
                changed = True
                self.dump_step(pipeline.name, step_name(step), following)
        return changed

    def run_step(self, step, pipeline: str, enabled: bool, iteration: int) -> bool:
        if isinstance(step, Pipeline):
            with phases.phase("pipeline", step.name):
                return self.run_pipeline(step, enabled, iteration)
        if isinstance(step, FixedPoint):
            return self.run_fixed_point(step, pipeline, enabled)
        return self.run_pass(step, pipeline, enabled, iteration)

    def run_fixed_point(self, fixed_point: FixedPoint, pipeline: str, enabled: bool) -> bool:
        changed = False
        for iteration in range(1, fixed_point.max_iterations + 1):
            step_changed = self.run_step(fixed_point.step, pipeline, enabled, iteration)
            if not step_changed:
                return changed
            changed = True
        raise MlirxlaError(
            f"'{fixed_point.name}' in pipeline '{pipeline}' did not reach a fixed point in {fixed_point.max_iterations} iterations"
        )

    def run_pass(self, step: ModulePass, pipeline: str, enabled: bool, iteration: int) -> bool:
        name = step.display_name
        if not self.should_run(step, enabled):
            return False
        before_text = self.text() if self.keeps_text_before() else None
        counting = self.counts_ops()
        ops_before = (self.ops_counted if self.ops_counted is not None else count_ops(self.module)) if counting else None
        start = time.perf_counter()
        with erasure.stage(f"pass '{name}' in pipeline '{pipeline}'", checking=self.options.check_erasure):
            with self.module.context, ir.Location.unknown(), phases.phase("pass", name), reports_rendered(self.renders_reports()):
                result = PassResult.of(step.run(self.module))
            changed = result.changed
            wall_ms = (time.perf_counter() - start) * 1000
            self.check_changed_flag(step, changed, before_text)
            ops_after = count_ops(self.module) if changed and counting else ops_before
            self.ops_counted = ops_after
            self.ledger.add(LedgerRow(pipeline, name, iteration, changed, wall_ms, ops_before, ops_after))
            if changed:
                phases.publish("module-changed", self)
            if changed and self.options.verify_each:
                self.check_invariants(name, pipeline, before_text)
            if result.report is not None:
                self.keep_report(step, result.report)
        self.print_after(step, changed)
        return changed

    # ------------------------------------------------------------------ decisions

    def enabled_explicitly(self, name: str) -> bool:
        only = self.options.enable_passes_only
        return only is not None and name in only

    def should_run(self, step: ModulePass, enabled_by_parent: bool) -> bool:
        names = {step.name, step.display_name}
        if names & self.options.disable_passes:
            return False
        if self.options.enable_passes_only is None or enabled_by_parent:
            return True
        return bool(names & self.options.enable_passes_only)

    def renders_reports(self) -> bool:
        return self.options.render_reports or self.dumps.directory is not None

    def counts_ops(self) -> bool:
        """Whether the ledger's rows count ops: only for those who read them (dumps, reports,
        `--print-ledger`, all of which render reports); a count is a walk with a Python call
        per op, a millisecond per pass that changed a module of a thousand ops, which a
        compile through the client or the plugin (no reports) would pay for nobody."""
        return self.renders_reports()

    def keeps_text_before(self) -> bool:
        return self.options.check_changed_flag or (self.options.verify_each and self.dumps.directory is not None)

    # ------------------------------------------------------------------ books

    def text(self) -> str:
        return printing.module_text(self.module)

    def keep_report(self, step: ModulePass, report: PassReport) -> None:
        self.reports[step.name] = report
        if self.dumps.directory is not None:
            for suffix, text in report.dump_files().items():
                self.dumps.write(suffix, text)

    def dump_step(self, pipeline: str, after: str, before: str, always: bool = False) -> None:
        options = self.options
        if options.dump_pass_re is None or not matches(options.dump_pipeline_re, pipeline):
            return
        if not always and not matches(options.dump_pass_re, after):
            return
        self.dumps.write_step(pipeline, after, before, self.text())

    def check_changed_flag(self, step: ModulePass, changed: bool, before_text: str | None) -> None:
        if not self.options.check_changed_flag:
            return
        really_changed = self.text() != before_text
        if really_changed != changed:
            raise MlirxlaError(
                f"pass '{step.display_name}' reported changed={changed} but the module {'changed' if really_changed else 'did not change'}"
            )

    def check_invariants(self, name: str, pipeline: str, before_text: str | None) -> None:
        try:
            verify_module(self.module, "-")
        except MlirxlaError as error:
            if before_text is not None:
                self.dumps.write_numbered(pipeline, f"before_{name}", before_text)
                self.dumps.write_numbered(pipeline, f"after_{name}.invalid", self.module.operation.get_asm(print_generic_op_form=True))
            raise MlirxlaError(f"invariant check failed after pass '{name}' in pipeline '{pipeline}': {error.message}", error.location) from None

    def check_pipeline_invariants(self, pipeline: str) -> None:
        try:
            verify_module(self.module, "-")
        except MlirxlaError as error:
            raise MlirxlaError(f"invariant check failed after pipeline '{pipeline}' (MLIRXLA_VERIFY_EACH=1 names the pass): "
                               f"{error.message}", error.location) from None

    def print_after(self, step: ModulePass, changed: bool) -> None:
        options = self.options
        if not (options.print_ir_after_all or (options.print_ir_after_change and changed)):
            return
        stream = options.print_stream or sys.stderr
        stream.write(f"// -----// IR Dump After {type(step).__name__} ({step.display_name}) //----- //\n")
        stream.write(self.text())
