"""The pass ledger: one row for every pass run, printable as a table, saved with the dump."""

from dataclasses import dataclass, fields

@dataclass(frozen=True)
class LedgerRow:
    """One pass run: where it ran, whether it changed the module, how long it took, op counts."""

    pipeline: str
    pass_name: str
    iteration: int  # 0 outside fixed points, else 1, 2, ...
    changed: bool
    wall_ms: float
    ops_before: int | None  # None where the runner did not count (no reports rendered)
    ops_after: int | None


COLUMNS = tuple(f.name for f in fields(LedgerRow))


@dataclass
class Ledger:
    rows: list[LedgerRow]

    def add(self, row: LedgerRow) -> None:
        self.rows.append(row)

    def tsv(self) -> str:
        lines = ["\t".join(COLUMNS)]
        for row in self.rows:
            lines.append("\t".join(format_cell(getattr(row, column)) for column in COLUMNS))
        return "\n".join(lines) + "\n"

    def table(self) -> str:
        """An aligned text table with a total line."""
        header = ["pipeline", "pass", "iter", "changed", "wall ms", "ops before", "ops after"]
        body = [
            [r.pipeline, r.pass_name, str(r.iteration or ""), "yes" if r.changed else "no", f"{r.wall_ms:.2f}", format_cell(r.ops_before), format_cell(r.ops_after)]
            for r in self.rows
        ]
        total = sum(r.wall_ms for r in self.rows)
        body.append(["total", f"{len(self.rows)} runs", "", f"{sum(r.changed for r in self.rows)} changed", f"{total:.2f}", "", ""])
        widths = [max(len(line[i]) for line in [header] + body) for i in range(len(header))]
        render = lambda cells: "  ".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip()
        return "\n".join([render(header), render(["-" * w for w in widths])] + [render(line) for line in body]) + "\n"

def format_cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)
