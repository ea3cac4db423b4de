"""Exposed communication from a trace: communication outside every compute region counts."""

import json

from scratchpar.trace.__main__ import main
from scratchpar.trace.exposure import exposed, merge


def region(pid, cat, ts, dur):
    return {"ph": "X", "name": cat, "cat": cat, "pid": pid, "tid": 0, "ts": ts, "dur": dur}


def test_merge_joins_overlapping_and_touching_intervals():
    assert merge([(5, 7), (0, 2), (1, 3), (3, 4)]) == [(0, 4), (5, 7)]


def test_only_communication_outside_compute_and_inside_the_window_is_exposed():
    regions = [region(0, "compute", 0, 10), region(0, "compute", 20, 10),  # window [0, 30]
               region(0, "comm", 5, 10),  # [5, 15]: 5 µs exposed, after the first compute
               region(0, "comm 2", 25, 15),  # [25, 40]: hidden up to 30, outside after
               region(0, "comm", -8, 4),  # before the window: start-up, not counted
               region(1, "compute", 0, 10), region(1, "comm", 2, 3)]  # fully hidden
    got = exposed(regions)
    assert got[0] == {"window_us": 30, "exposed_us": 5, "fraction": 5 / 30}
    assert got[1]["exposed_us"] == 0


def test_the_cli_reports_each_rank(tmp_path, capsys):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": [region(0, "compute", 0, 4000),
                                                region(0, "comm", 4000, 1000),
                                                region(0, "compute", 5000, 5000)]}))
    assert main(["exposed", str(path)]) == 0
    assert "rank 0: communication exposed 1.0 ms of 10.0 ms (10%)" in capsys.readouterr().out


def test_a_trace_without_compute_is_refused(tmp_path, capsys):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": [region(0, "comm", 0, 5)]}))
    assert main(["exposed", str(path)]) == 2
    assert "no compute regions" in capsys.readouterr().err
