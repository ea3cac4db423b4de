"""Plain-text tables with aligned columns: text left, numbers right."""

from __future__ import annotations


def format_table(headers: list[str], rows: list[list]) -> str:
    """One line per row under a header and a rule; floats are shown with two decimals."""
    cells = [headers] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    numeric = [any(isinstance(row[i], (int, float)) for row in rows) for i in range(len(headers))]
    lines = []
    for row in cells:
        parts = [c.rjust(w) if num else c.ljust(w) for c, w, num in zip(row, widths, numeric)]
        lines.append("  ".join(parts).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)
