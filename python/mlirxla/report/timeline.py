"""The compile as a timeline: the front door, the pipelines (each round of a fixed point its
own bar), every pass run (coloured by whether it changed the module), the thunk emission and
each kernel's LLVM compile, on one time axis; the pass ledger as a table; and, for every pass
that changed the module, the diff of the module's text, folded."""

import difflib
from dataclasses import dataclass
from html import escape

from .units import human_seconds

WIDTH, LEFT, LANE, GAP = 1000, 110, 22, 6
LANES = ("frontdoor", "pipeline", "pass", "backend", "kernel")
LANE_TITLES = {"frontdoor": "front door", "pipeline": "pipelines", "pass": "passes", "backend": "thunk emission",
               "kernel": "kernel compiles"}
COLOURS = {"frontdoor": "#9ecae1", "pipeline": "#c7e9c0", "backend": "#dadaeb", "kernel": "#bcbddc",
           "changed": "#fd8d3c", "unchanged": "#d9d9d9"}
MAX_DIFF_LINES = 3000


@dataclass(frozen=True)
class Bar:
    lane: str
    start_ns: int
    end_ns: int
    label: str
    colour: str
    anchor: str = ""  # the diff it links to


def pass_bars(spans: list, ledger_rows: list) -> list[Bar]:
    """A bar per pass run: the i-th pass phase is the i-th ledger row (both count the passes
    that ran, in order)."""
    passes = sorted((span for span in spans if span[0].category == "pass"), key=lambda span: span[0].start_ns)
    bars = []
    for number, ((phase, end), row) in enumerate(zip(passes, ledger_rows)):
        round_text = f" round {row.iteration}" if row.iteration else ""
        label = (f"{row.pipeline} / {row.pass_name}{round_text}: {'changed' if row.changed else 'unchanged'}, "
                 f"{row.wall_ms:.2f} ms, ops {row.ops_before} -> {row.ops_after}")
        bars.append(Bar("pass", phase.start_ns, end, label, COLOURS["changed" if row.changed else "unchanged"],
                        f"diff-{number}" if row.changed else ""))
    return bars


def other_bars(spans: list) -> list[Bar]:
    rounds: dict[str, int] = {}
    bars = []
    for phase, end in sorted(spans, key=lambda span: span[0].start_ns):
        if phase.category == "pass" or phase.category not in LANES:
            continue
        label = phase.name
        if phase.category == "pipeline":
            rounds[phase.name] = rounds.get(phase.name, 0) + 1
            label = f"pipeline {phase.name} (run {rounds[phase.name]})"
        bars.append(Bar(phase.category, phase.start_ns, end, f"{label}: {human_seconds((end - phase.start_ns) / 1e9)}",
                        COLOURS[phase.category]))
    return bars


def timeline_svg(spans: list, ledger_rows: list) -> str:
    bars = other_bars(spans) + pass_bars(spans, ledger_rows)
    if not bars:
        return "<p>No phases were recorded.</p>"
    origin = min(bar.start_ns for bar in bars)
    total = max(max(bar.end_ns for bar in bars) - origin, 1)
    x = lambda ns: LEFT + (ns - origin) * WIDTH / total
    height = len(LANES) * (LANE + GAP) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{LEFT + WIDTH + 20}" height="{height}" '
           'font-family="Helvetica, sans-serif" font-size="11">']
    for number, lane in enumerate(LANES):
        out.append(f'<text x="4" y="{number * (LANE + GAP) + LANE - 6}">{LANE_TITLES[lane]}</text>')
    for bar in bars:
        top = LANES.index(bar.lane) * (LANE + GAP)
        rect = (f'<rect class="bar {bar.lane}" x="{x(bar.start_ns):.2f}" y="{top}" width="{max(x(bar.end_ns) - x(bar.start_ns), 1):.2f}" '
                f'height="{LANE}" fill="{bar.colour}" stroke="#666" stroke-width="0.3"><title>{escape(bar.label)}</title></rect>')
        out.append(f'<a href="#{bar.anchor}">{rect}</a>' if bar.anchor else rect)
    axis = len(LANES) * (LANE + GAP) + 14
    out.append(f'<text x="{LEFT}" y="{axis}">0</text>')
    out.append(f'<text x="{LEFT + WIDTH}" y="{axis}" text-anchor="end">{human_seconds(total / 1e9)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def ledger_table(ledger_rows: list) -> str:
    lines = ['<table class="ledger"><thead><tr><th>#</th><th>pipeline</th><th>pass</th><th>round</th><th>changed</th>'
             '<th>wall ms</th><th>ops before</th><th>ops after</th></tr></thead><tbody>']
    for number, row in enumerate(ledger_rows):
        changed = f'<a href="#diff-{number}">yes</a>' if row.changed else "no"
        lines.append(f'<tr class="{"changed" if row.changed else ""}"><td>{number}</td><td>{escape(row.pipeline)}</td>'
                     f'<td>{escape(row.pass_name)}</td><td>{row.iteration or ""}</td><td>{changed}</td>'
                     f'<td class="number">{row.wall_ms:.2f}</td><td class="number">{row.ops_before}</td>'
                     f'<td class="number">{row.ops_after}</td></tr>')
    total = sum(row.wall_ms for row in ledger_rows)
    lines.append(f'</tbody><tfoot><tr><td></td><td>total</td><td>{len(ledger_rows)} runs</td><td></td>'
                 f'<td>{sum(row.changed for row in ledger_rows)} changed</td><td class="number">{total:.2f}</td>'
                 '<td></td><td></td></tr></tfoot></table>')
    return "\n".join(lines)


def diff_lines(before: str, after: str) -> list[str]:
    return list(difflib.unified_diff(before.splitlines(), after.splitlines(), "before", "after", lineterm="", n=2))[2:]


def diff_html(lines: list[str]) -> str:
    shown = lines[:MAX_DIFF_LINES]
    classes = {"+": "add", "-": "del", "@": "hunk"}
    body = "\n".join(f'<span class="{classes.get(line[:1], "same")}">{escape(line)}</span>' for line in shown)
    if len(lines) > len(shown):
        body += f'\n<span class="hunk">... {len(lines) - len(shown)} more lines (the dump has the whole module)</span>'
    return f'<pre class="diff">{body}</pre>'


def diffs_html(snapshots: list, ledger_rows: list) -> str:
    """A folded diff per changing pass: each snapshot after the first is the module after the
    row before its `ledger_rows`."""
    if len(snapshots) < 2:
        return "<p>No pass changed the module (or the module's text was not kept).</p>"
    parts = []
    for before, after in zip(snapshots, snapshots[1:]):
        number = after.ledger_rows - 1
        row = ledger_rows[number]
        lines = diff_lines(before.text, after.text)
        added = sum(line.startswith("+") for line in lines)
        removed = sum(line.startswith("-") for line in lines)
        round_text = f" round {row.iteration}" if row.iteration else ""
        parts.append(f'<details class="diff" id="diff-{number}"><summary>#{number} {escape(row.pipeline)} / '
                     f'{escape(row.pass_name)}{round_text}: <span class="add">+{added}</span> '
                     f'<span class="del">-{removed}</span> lines, {row.wall_ms:.2f} ms</summary>{diff_html(lines)}</details>')
    return "\n".join(parts)
