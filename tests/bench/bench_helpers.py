"""Reading a benchmark's printed tables back, for the benchmark tests."""


def table_rows(out: str, heading: str) -> list[list[str]]:
    """The cells of every row of the table printed under the line starting with ``heading``."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading)) + 3
    rows = []
    for line in lines[start:]:
        if not line.strip():
            break
        rows.append(line.split())
    return rows
