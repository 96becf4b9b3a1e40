"""What a pass is: a small frozen dataclass with a name, a summary, typed options and `run`.

    @dataclass(frozen=True)
    class AlgSimpPass(ModulePass):
        '''Folds algebraic identities on xhlo ops. Changed: any op replaced.'''
        name: ClassVar[str] = "xhlo-algsimp"
        summary: ClassVar[str] = "algebraic simplification"
        fast_math: bool = False  # enables x + (y - x) -> y
        def run(self, module) -> bool: ...

`run` rewrites the module in place and returns whether it changed it (XLA's
HloPassInterface::Run): a bare `bool`, or a `PassResult` when the pass also reports on its run
(fusion decisions, the schedule, the buffer assignment). A report is plain data that knows its
dump files; the runner keeps the last report of each pass and writes those files, so a pass
holds no state between runs. Options are the dataclass fields; in pipeline text they are written
in kebab case: `xhlo-algsimp{fast-math=true}`. Upstream MLIR passes join the same pipelines
through `UpstreamPass`, which reports a change when the module's text changed.

A report that names values (`%12`) renders its text while the pass runs, and naming values
numbers the whole module (about as costly as printing it); a pass asks `rendering_reports()`
first and makes no such report when the runner says nobody will read it (a compile through the
client or the plugin that does not dump: `RunOptions.render_reports`).
"""

import abc
import contextlib
import contextvars
import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from mlirxla.context import pass_manager
from mlirxla.errors import MlirxlaError, first_line
from mlirxla.mlir import ir, passmanager


_RENDERING_REPORTS = contextvars.ContextVar("mlirxla_rendering_reports", default=True)


def rendering_reports() -> bool:
    """Whether the running pass should render the text reports that name values."""
    return _RENDERING_REPORTS.get()


@contextlib.contextmanager
def reports_rendered(wanted: bool):
    """Passes run inside say `rendering_reports() == wanted`."""
    token = _RENDERING_REPORTS.set(wanted)
    try:
        yield
    finally:
        _RENDERING_REPORTS.reset(token)


class PassReport:
    """What a pass says about one run, as plain data; subclasses carry what their readers need."""

    def dump_files(self) -> dict[str, str]:
        """`{suffix: text}`, written as `module_NNNN.<name>.<suffix>` when dumping (e.g.
        `fusion-decisions.txt`, `buffer-assignment.txt`)."""
        return {}


@dataclass(frozen=True)
class TextReport(PassReport):
    """A report that is nothing but its dump files, rendered while the pass ran (their value
    names exist only then)."""

    files: dict[str, str]

    def dump_files(self) -> dict[str, str]:
        return dict(self.files)


@dataclass(frozen=True)
class PassResult:
    """What `run` returns when the pass has a report."""

    changed: bool
    report: PassReport | None = None

    @staticmethod
    def of(outcome: "bool | PassResult") -> "PassResult":
        """Either kind of `run` result as a `PassResult`."""
        return outcome if isinstance(outcome, PassResult) else PassResult(bool(outcome))


@dataclass(frozen=True)
class ModulePass(abc.ABC):
    """Base of mlirxla passes. Subclasses set `name`, `summary` and implement `run`."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""

    @abc.abstractmethod
    def run(self, module: ir.Module) -> "bool | PassResult":
        """Rewrite `module` in place; return whether anything changed (with a report, a `PassResult`)."""

    @property
    def display_name(self) -> str:
        """The pass as it is written in a pipeline, options included."""
        options = self.option_text()
        return f"{self.name}{{{options}}}" if options else self.name

    def option_text(self) -> str:
        parts = []
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value != field.default:
                parts.append(f"{field.name.replace('_', '-')}={format_option(value)}")
        return " ".join(parts)

    @classmethod
    def with_options(cls, options: dict[str, str]) -> "ModulePass":
        """An instance from `{kebab-name: text}` options, each converted to its field's type."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values = {}
        for key, text in options.items():
            field_name = key.replace("-", "_")
            if field_name not in fields:
                known = ", ".join(f.replace("_", "-") for f in fields) or "none"
                raise MlirxlaError(f"pass '{cls.name}' has no option '{key}' (options: {known})")
            values[field_name] = parse_option(cls.name, key, text, fields[field_name].type)
        return cls(**values)


def format_option(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def parse_option(pass_name: str, key: str, text: str, kind) -> object:
    kind_name = kind if isinstance(kind, str) else kind.__name__
    try:
        if kind_name == "bool":
            if text.lower() not in ("true", "false", "1", "0"):
                raise ValueError(text)
            return text.lower() in ("true", "1")
        if kind_name == "int":
            return int(text)
        if kind_name == "float":
            return float(text)
        return text
    except ValueError:
        raise MlirxlaError(f"option '{key}' of pass '{pass_name}' expects a {kind_name}, got '{text}'") from None


@dataclass(frozen=True)
class UpstreamPass(ModulePass):
    """An upstream MLIR pass (or nested pipeline) given in MLIR's own pipeline syntax."""

    name: ClassVar[str] = "upstream"
    summary: ClassVar[str] = "an MLIR pass run by MLIR's PassManager"
    text: str = ""

    @property
    def display_name(self) -> str:
        return self.text

    def pass_manager(self, context: ir.Context) -> passmanager.PassManager:
        with context:
            try:
                return pass_manager(f"builtin.module({self.text})")
            except (ValueError, ir.MLIRError) as error:
                raise MlirxlaError(f"unknown pass or malformed pipeline '{self.text}': {first_line(error)}") from None

    def run(self, module: ir.Module) -> bool:
        erases_only = self.text in ONLY_ERASING
        before = count_ops(module) if erases_only else module.operation.get_asm(enable_debug_info=True)
        manager = self.pass_manager(module.context)
        try:
            manager.run(module.operation)
        except ir.MLIRError as error:
            raise MlirxlaError(f"pass '{self.text}' failed: {first_line(error)}") from None
        return (count_ops(module) if erases_only else module.operation.get_asm(enable_debug_info=True)) != before


# upstream passes whose only change is erasing ops (CSE replaces an op by an equal one before
# it): their change is seen in the op count, without printing the module twice (a large
# module's print costs several times the pass)
ONLY_ERASING = frozenset({"cse", "func.func(cse)", "symbol-dce"})


def count_ops(module: ir.Module) -> int:
    """The ops in `module`, nested ones included (the module op not)."""
    count = -1

    def visit(_):
        nonlocal count
        count += 1
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return count
