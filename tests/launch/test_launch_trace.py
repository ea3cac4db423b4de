"""``mpiexec -n 2 python -m scratchpar.train --trace FILE``: rank 0 writes one Chrome trace with
both ranks' compute and communication regions, and ``python -m scratchpar.trace plot`` draws it."""

import json
import subprocess
import sys

import pytest
from launch_helpers import ROOT, run_mpi

TINY = ["--d-model", "16", "--n-heads", "2", "--n-layers", "1", "--seq-len", "12",
        "--vocab-size", "10", "--order", "1", "--mean-length", "6", "--steps", "3",
        "--warmup", "1", "--batch-size", "5", "--eval-batches", "1", "--no-progress",
        "--bucket-mb", "0.002"]


def test_two_ranks_write_one_merged_trace_that_the_plot_command_draws(tmp_path):
    trace = tmp_path / "trace.json"
    result = run_mpi(2, ["-m", "scratchpar.train", *TINY, "--metrics", str(tmp_path / "m.jsonl"),
                         "--trace", str(trace)], timeout=90)
    assert result.returncode == 0, result.stderr
    events = json.loads(trace.read_text())["traceEvents"]
    regions = [e for e in events if e["ph"] == "X"]
    assert {e["pid"] for e in regions} == {0, 1}
    for rank in (0, 1):
        mine = [e for e in regions if e["pid"] == rank]
        steps = [e["name"] for e in mine if e["cat"] == "compute"]
        assert steps == ["forward", "backward", "optimizer"] * 3
        reduces = [e for e in mine if e["name"].startswith("all_reduce/")]
        assert len(reduces) >= 3 * 3  # per step: the loss totals and at least two buckets
        assert all(e["cat"] == "comm" and e["args"]["bytes"] > 0 for e in reduces)
        for back in (e for e in mine if e["name"] == "backward"):  # buckets start in backward
            assert any(back["ts"] < r["ts"] < back["ts"] + back["dur"] for r in reduces)
    for e in regions:
        assert isinstance(e["ts"], float) and isinstance(e["dur"], float) and e["dur"] >= 0
        assert isinstance(e["tid"], int)
    durations = sorted(e["dur"] for e in regions)
    assert 1 < durations[-1] < 5e6  # µs: the longest region lasts between 1 µs and 5 s
    names = {e["name"] for e in events if e["ph"] == "M"}
    assert {"process_name", "thread_name"} <= names
    pytest.importorskip("matplotlib")
    png = tmp_path / "timeline.png"
    plot = subprocess.run([sys.executable, "-m", "scratchpar.trace", "plot", str(trace), "-o",
                           str(png)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert plot.returncode == 0, plot.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
