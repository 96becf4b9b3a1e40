"""The temp heap as a picture: offset (up) against schedule time (right), one rectangle per
buffer of the slab, its values named on hover; the step where the most temp bytes are live
marked, and XLA:CPU's temp bytes for the same program drawn as a line when known."""

from dataclasses import dataclass
from html import escape

from .units import human_bytes

WIDTH, HEIGHT, LEFT, TOP, BOTTOM = 900, 420, 70, 20, 40
PALETTE = ("#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5", "#d9d9d9", "#ccebc5")


@dataclass(frozen=True)
class HeapFigures:
    slab_bytes: int
    peak_live_bytes: int
    peak_step: int
    peak_op: str
    xla_temp_bytes: int | None


def temp_buffers(assignment) -> list:
    return [b for b in assignment.buffers if b.kind == "temp" and b.size > 0]


def live_by_step(assignment) -> list[int]:
    temps = temp_buffers(assignment)
    return [sum(b.size for b in temps if b.start <= step <= b.end) for step in range(max(len(assignment.sequence), 1))]


def figures(assignment, xla_temp_bytes: int | None) -> HeapFigures:
    live = live_by_step(assignment)
    step = max(range(len(live)), key=live.__getitem__)
    op = assignment.sequence[step] if step < len(assignment.sequence) else ""
    return HeapFigures(assignment.heap.size, live[step], step, op, xla_temp_bytes)


def buffer_title(buffer) -> str:
    values = ", ".join(f"{value.name} {value.shape}" for value in buffer.values)
    return f"{buffer.name}: {human_bytes(buffer.size)} at offset {buffer.offset}, steps {buffer.start}-{buffer.end}: {values}"


def heap_svg(assignment, xla_temp_bytes: int | None = None) -> str:
    facts = figures(assignment, xla_temp_bytes)
    steps = max(len(assignment.sequence), 1)
    top_bytes = max(facts.slab_bytes, xla_temp_bytes or 0, 1)
    x = lambda step: LEFT + step * WIDTH / steps
    y = lambda offset: TOP + HEIGHT - offset * HEIGHT / top_bytes
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="heap" width="{LEFT + WIDTH + 160}" height="{TOP + HEIGHT + BOTTOM}" '
           'font-family="Helvetica, sans-serif" font-size="10">',
           f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH}" height="{HEIGHT}" fill="#fafafa" stroke="#333"/>']
    for number, buffer in enumerate(temp_buffers(assignment)):
        left, right = x(buffer.start), x(buffer.end + 1)
        upper, lower = y(buffer.offset + buffer.size), y(buffer.offset)
        out.append(f'<rect class="buffer" x="{left:.1f}" y="{upper:.1f}" width="{max(right - left, 1):.1f}" '
                   f'height="{max(lower - upper, 1):.1f}" fill="{PALETTE[number % len(PALETTE)]}" stroke="#444" stroke-width="0.5">'
                   f'<title>{escape(buffer_title(buffer))}</title></rect>')
    out += axis_lines(facts, x, y)
    out.append("</svg>")
    return "\n".join(out)


def axis_lines(facts: HeapFigures, x, y) -> list[str]:
    peak_x = x(facts.peak_step + 0.5)
    lines = [
        f'<line class="peak" x1="{peak_x:.1f}" y1="{TOP}" x2="{peak_x:.1f}" y2="{TOP + HEIGHT}" stroke="#c00" stroke-dasharray="4 3"/>',
        f'<text x="{peak_x + 4:.1f}" y="{TOP + 12}" fill="#c00">peak live {escape(human_bytes(facts.peak_live_bytes))} '
        f'at step {facts.peak_step} ({escape(facts.peak_op)})</text>',
        f'<line x1="{LEFT}" y1="{y(facts.slab_bytes):.1f}" x2="{LEFT + WIDTH}" y2="{y(facts.slab_bytes):.1f}" stroke="#333"/>',
        f'<text x="{LEFT + WIDTH + 6}" y="{y(facts.slab_bytes) + 4:.1f}">slab {escape(human_bytes(facts.slab_bytes))}</text>',
        f'<text x="{LEFT - 6}" y="{TOP + HEIGHT + 4}" text-anchor="end">0</text>',
        f'<text x="{LEFT + WIDTH / 2}" y="{TOP + HEIGHT + 28}" text-anchor="middle">schedule step</text>',
        f'<text x="14" y="{TOP + HEIGHT / 2}" transform="rotate(-90 14 {TOP + HEIGHT / 2})" text-anchor="middle">offset in the temp slab</text>',
    ]
    if facts.xla_temp_bytes:
        at = y(facts.xla_temp_bytes)
        lines += [f'<line class="xla" x1="{LEFT}" y1="{at:.1f}" x2="{LEFT + WIDTH}" y2="{at:.1f}" stroke="#06c" stroke-dasharray="6 3"/>',
                  f'<text x="{LEFT + WIDTH + 6}" y="{at + 14:.1f}" fill="#06c">XLA:CPU temp {escape(human_bytes(facts.xla_temp_bytes))}</text>']
    return lines
