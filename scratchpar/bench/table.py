"""Plain-text tables with aligned columns: text left, numbers right."""

from __future__ import annotations

import numpy as np


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


def table(title: str, rows: list[dict], columns: dict[str, str] | list[str]) -> str:
    """A blank line, ``title``, then the table of ``columns`` (header → key of each row dict, or
    keys that are their own headers); a yes/no cell shows as ✓/✗ and a missing one (None) as -."""
    columns = columns if isinstance(columns, dict) else {key: key for key in columns}
    cells = [[_mark(r[k]) for k in columns.values()] for r in rows]
    return f"\n{title}\n" + format_table(list(columns), cells)


def _mark(value):
    return ("✓" if value else "✗") if isinstance(value, (bool, np.bool_)) else value


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)
