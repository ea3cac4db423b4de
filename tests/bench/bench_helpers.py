"""Running a benchmark's quick mode and reading its printed tables back, for the benchmark
tests."""

import json
import os
import subprocess
import sys

from scratchpar.jobs.mpijob import ROOT


def run_quick(name: str, tmp, figures: bool = True) -> tuple[str, dict, object]:
    """``python -m scratchpar.bench NAME --quick`` with its JSON and, where it draws some
    (``figures``), its figures under ``tmp``: the printed tables, the JSON, and the figures
    folder."""
    path, folder = tmp / f"{name}.json", tmp / "figures"
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    drawn = ["--figures", str(folder)] if figures else []
    done = subprocess.run([sys.executable, "-m", "scratchpar.bench", name, "--quick",
                           "--json", str(path), *drawn],
                          capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout, json.loads(path.read_text()), folder


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
