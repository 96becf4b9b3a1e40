"""One compile as one self-contained HTML page (no network needed to open it): the pipeline
as a timeline with the pass ledger, the diff of every pass that changed the module (folded),
the fusion graph (click a node: its ops, its kernel source, the fusion decisions that formed
it and the merges it did not take), the temp heap over the schedule next to XLA's figure, and
the thunk sequence with each thunk's measured time when a profile was recorded."""

import json
import os
from html import escape

from mlirxla.errors import MlirxlaError

from . import graph, heap, timeline
from .decisions import all_decisions, kernel_decisions
from .op_plan import op_plan
from .record import CompileRecord
from .thunk_facts import ThunkFacts, flows, thunk_facts, with_figures
from .units import human_bytes, human_seconds
from .xla_memory import XlaFigure

MAX_OP_LINES = 400
ASSETS = os.path.join(os.path.dirname(__file__), "assets")


def asset(name: str) -> str:
    with open(os.path.join(ASSETS, name)) as handle:
        return handle.read()


def op_text(op) -> str:
    if op is None:
        return ""
    lines = op.get_asm(large_elements_limit=16).splitlines()
    return "\n".join(lines[:MAX_OP_LINES] + ([f"... {len(lines) - MAX_OP_LINES} more lines"] if len(lines) > MAX_OP_LINES else []))


def node_data(fact: ThunkFacts, record: CompileRecord, decisions: list, measured: dict) -> dict:
    symbol = getattr(fact.thunk, "symbol", None)
    made_of = kernel_decisions(fact.op, decisions) if fact.op is not None and decisions else None
    timing = measured.get(id(fact.thunk))
    return {
        "name": fact.name, "kind": fact.kind, "category": fact.category, "routine": fact.routine, "shape": fact.shape,
        "bytes_in": fact.bytes_in, "bytes_out": fact.bytes_out, "flops": fact.flops,
        "estimate": human_seconds(fact.estimate_s) if fact.estimate_s is not None else "",
        "measured": f"{human_seconds(timing.total_s / timing.calls)} x {timing.calls}" if timing else "",
        "achieved": achieved(fact, timing) if timing else "",
        "where": f"{fact.region} of thunk {fact.parent}" if fact.parent is not None else "",
        "ops": op_text(fact.op), "source": record.kernel_sources.get(symbol, "") if symbol else "",
        "formed": made_of.formed if made_of else [], "refused": made_of.refused if made_of else [],
    }


def achieved(fact: ThunkFacts, timing) -> str:
    """The bandwidth and flop rate a measured thunk reached."""
    seconds = max(timing.total_s / timing.calls, 1e-12)
    rate = f"{(fact.bytes_in + fact.bytes_out) / seconds / 1e9:.2f} GB/s"
    return rate + (f", {fact.flops / seconds / 1e9:.2f} GFLOP/s" if fact.flops else "")


def facts_of(record: CompileRecord) -> tuple[object | None, list[ThunkFacts]]:
    """The plan and the facts of its thunks: the executable's, or for a module that went
    through a pipeline only, its ops as the thunks they would be."""
    module = record.runner.module if record.runner is not None else None
    if record.plan is not None:
        return record.plan, thunk_facts(record.plan, module, assignment_of(record))
    if module is not None:
        plan, facts = op_plan(module)
        return plan, with_figures(facts, assignment_of(record))
    return None, []


def graph_section(record: CompileRecord, plan, facts: list[ThunkFacts], measured: dict) -> tuple[str, dict]:
    """The graph's SVG (or why there is none) and the data its nodes show when clicked."""
    if plan is None:
        return "<p>Nothing was compiled.</p>", {}
    decisions = all_decisions(record.runner.reports) if record.runner else []
    data = {graph.node_id(f.index): node_data(f, record, decisions, measured) for f in facts if f.category != "control"}
    try:
        svg = graph.render_svg(facts, flows(plan, facts))
    except MlirxlaError as error:
        svg = f'<p class="missing">{escape(str(error))}</p>'
    return svg, data


def assignment_of(record: CompileRecord):
    report = record.runner.reports.get("xhlo-buffer-assignment") if record.runner else None
    return report.assignment if report is not None else None


def heap_section(record: CompileRecord, xla: XlaFigure | None) -> str:
    assignment = assignment_of(record)
    if assignment is None:
        return "<p>No buffer assignment ran in this pipeline.</p>"
    figures = heap.figures(assignment, xla.temp_bytes if xla else None)
    xla_text = (human_bytes(xla.temp_bytes) if xla and xla.temp_bytes is not None
                else escape(xla.why_not if xla else "not asked for"))
    rows = [("temp slab", human_bytes(figures.slab_bytes)), ("peak live temp bytes", human_bytes(figures.peak_live_bytes)),
            ("at step", f"{figures.peak_step} ({escape(figures.peak_op)})"), ("XLA:CPU temp bytes, same program", xla_text)]
    table = "".join(f"<tr><th>{name}</th><td>{value}</td></tr>" for name, value in rows)
    return f'<div class="heap-panel">{heap.heap_svg(assignment, figures.xla_temp_bytes)}<table class="figures">{table}</table></div>'


def thunk_table(record: CompileRecord, facts: list[ThunkFacts], measured: dict) -> str:
    if record.plan is None:
        return "<p>No executable: the module went through a pipeline only (<code>mlirxla-run --report</code> compiles it).</p>"
    head = ("<tr><th>#</th><th>kind</th><th>name</th><th>calls into</th><th>in</th><th>out</th><th>estimated</th>"
            "<th>measured (per call x calls)</th><th>achieved</th></tr>")
    rows = []
    for fact in facts:
        timing = measured.get(id(fact.thunk))
        indent = "&nbsp;&nbsp;&nbsp;&nbsp;" * depth(fact, facts)
        rows.append(f'<tr><td>{fact.index}</td><td>{escape(fact.kind)}</td><td>{indent}{escape(fact.name)}</td>'
                    f'<td>{escape(fact.routine)}</td><td class="number">{human_bytes(fact.bytes_in)}</td>'
                    f'<td class="number">{human_bytes(fact.bytes_out)}</td>'
                    f'<td class="number">{human_seconds(fact.estimate_s) if fact.estimate_s is not None else ""}</td>'
                    f'<td class="number">{human_seconds(timing.total_s / timing.calls) + f" x {timing.calls}" if timing else ""}</td>'
                    f'<td class="number">{achieved(fact, timing) if timing and fact.category != "control" else ""}</td></tr>')
    described = escape(record.plan.describe())
    return (f'<table class="thunks"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'
            f'<details><summary>as the dump writes it (thunk-sequence.txt)</summary><pre>{described}</pre></details>')


def depth(fact: ThunkFacts, facts: list[ThunkFacts]) -> int:
    return 0 if fact.parent is None else 1 + depth(facts[fact.parent], facts)


def summary(record: CompileRecord, source: str, backend: str | None) -> str:
    spans = record.spans
    seconds = (max(end for _, end in spans) - record.start_ns) / 1e9 if spans else 0.0
    kernels = len(record.kernel_sources)
    thunks = len(record.plan.thunks) if record.plan is not None else 0
    rows = record.runner.ledger.rows if record.runner else []
    how = f"backend <b>{escape(backend)}</b>, compiled" if backend else "its pipeline run (no backend)"
    return (f"<p>{escape(source)}: {how} in <b>{human_seconds(seconds)}</b>; "
            f"{len(rows)} pass runs ({sum(r.changed for r in rows)} changed the module), {kernels} kernels compiled, "
            f"{thunks} thunks.</p>")


def report_html(record: CompileRecord, source: str, backend: str | None = "cpu", measured: dict | None = None,
                xla: XlaFigure | None = None) -> str:
    measured = measured or {}
    rows = record.runner.ledger.rows if record.runner else []
    plan, facts = facts_of(record)
    svg, nodes = graph_section(record, plan, facts, measured)
    for node in nodes.values():  # decisions name locations in the module read from "-"
        node["formed"], node["refused"] = ([line.replace(" at -:", f" at {source}:") for line in node[key]]
                                           for key in ("formed", "refused"))
    payload = json.dumps({"nodes": nodes}).replace("</", "<\\/")
    return asset("report.html").format(
        title=escape(f"mlirxla report: {record.module_name}"), style=asset("report.css"), script=asset("report.js"),
        summary=summary(record, source, backend), timeline=timeline.timeline_svg(record.spans, rows),
        ledger=timeline.ledger_table(rows), diffs=timeline.diffs_html(record.snapshots, rows), graph=svg,
        heap=heap_section(record, xla), thunks=thunk_table(record, facts, measured), data=payload)


def write_report(path: str, html_text: str) -> None:
    try:
        with open(path, "w") as handle:
            handle.write(html_text)
    except OSError as error:
        raise MlirxlaError(f"cannot write the report: {error.strerror}", path) from None


class Recording:
    """What `--report` does around a compile: record it (`record.Recorder`, the module's text
    after every changing pass kept), start XLA's figure for the same program when `data` is
    given (`xla_memory.py`), then `write` the page of the compile."""

    def __init__(self, source: str, backend: str | None = "cpu", data: bytes | None = None, xla: XlaFigure | None = None):
        from .record import Recorder
        from .xla_memory import Pending

        self.source, self.backend = source, backend
        self.recorder = Recorder(keep_ir=True)
        self.pending = Pending(data) if data is not None else None
        self.xla = xla

    def __enter__(self) -> "Recording":
        from mlirxla import phases

        phases.add_listener(self.recorder)
        return self

    def __exit__(self, kind, *_) -> None:
        from mlirxla import phases

        phases.remove_listener(self.recorder)
        if kind is not None and self.pending is not None:
            self.pending.cancel()

    def record(self, executable=None) -> CompileRecord:
        """The record of the compile that made `executable`; else of the last compile heard."""
        compiled = self.recorder.compiled()
        if executable is not None:
            compiled = [record for record in compiled if record.executable is executable] or compiled
        return compiled[-1] if compiled else (self.recorder.records[-1] if self.recorder.records else CompileRecord())

    def html(self, executable=None, measured: dict | None = None) -> str:
        xla = self.pending.result() if self.pending is not None else self.xla
        return report_html(self.record(executable), self.source, self.backend, measured, xla)

    def write(self, path: str, executable=None, measured: dict | None = None) -> None:
        write_report(path, self.html(executable, measured))
