"""Plain-text tables from a column spec: text left, numbers right."""

from __future__ import annotations

import string

import numpy as np


def table(title: str, rows: list[dict], columns: dict | None = None,
          formats: dict[str, str] | None = None) -> str:
    """A blank line, ``title``, then one line per row of ``rows`` under the headers and a rule.
    ``columns`` maps each header to a row's key, to a format string over the row
    (``"{loss:.6f}"``), or to a function of the row; without it, every key of the first row is
    a column headed by its name. A float shows with two decimals, or as ``formats`` gives for
    its header (``{"loss": ".4f"}``), a yes/no as ✓/✗, a dict as its ``key:value`` pairs (a
    histogram: ``0:8 1:10``), a missing value (None, or a format string's None) as -."""
    if columns is None:
        columns = {key: key for key in (rows[0] if rows else {})}
    values = [[_value(spec, row) for spec in columns.values()] for row in rows]
    specs = [(formats or {}).get(header, ".2f") for header in columns]
    cells = [list(columns)] + [[_cell(v, spec) for v, spec in zip(row, specs)] for row in values]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    numeric = [any(isinstance(row[i], (int, float, np.number)) and not isinstance(
        row[i], (bool, np.bool_)) for row in values) for i in range(len(columns))]
    lines = ["  ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in
                       zip(row, widths, numeric)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return f"\n{title}\n" + "\n".join(lines)


def printed(tables: dict[str, tuple[str, list[dict]]]) -> dict[str, list[dict]]:
    """Print each (title, rows) of ``tables`` as a :func:`table`, but those without rows; what
    comes back is each one's rows under its key, as a JSON keeps them."""
    for title, rows in tables.values():
        if rows:
            print(table(title, rows))
    return {key: rows for key, (_, rows) in tables.items()}


def _value(spec, row: dict):
    if callable(spec):
        return spec(row)
    if "{" not in spec:
        return row[spec]
    fields = [name for _, name, _, _ in string.Formatter().parse(spec) if name]
    return None if any(row[f] is None for f in fields) else spec.format_map(row)


def _cell(value, spec: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, (bool, np.bool_)):
        return "✓" if value else "✗"
    if isinstance(value, dict):
        return " ".join(f"{k}:{v}" for k, v in value.items())
    if isinstance(value, (float, np.floating)):
        return format(value, spec)
    return str(value)
