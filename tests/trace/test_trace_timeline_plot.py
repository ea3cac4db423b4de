"""``python -m scratchpar.trace plot TRACE`` draws a row per rank and lane from a Chrome trace."""

import struct

import pytest

from scratchpar.trace.__main__ import main
from scratchpar.trace.chrome import write_chrome
from scratchpar.trace.timeline_plot import kind, lane_order


def event(name, cat, start, end, nbytes=0):
    return {"name": name, "cat": cat, "start": start, "end": end, "bytes": nbytes}


def png_size(path) -> tuple[int, int]:
    data = open(path, "rb").read(24)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_region_kinds_and_lane_order():
    assert kind("all_reduce/recursive_doubling") == "all_reduce" and kind("backward") == "backward"
    assert sorted(["comm", "zeta", "compute", "alpha"], key=lane_order) == [
        "compute", "comm", "alpha", "zeta"]


def test_plot_draws_one_row_per_rank_and_lane(tmp_path):
    pytest.importorskip("matplotlib")
    ranks = [{"rank": r, "origin_ns": 0, "events": [
        event("forward", "compute", 0, 2_000_000),
        event("backward", "compute", 2_000_000, 6_000_000),
        event("all_reduce/ring", "comm", 3_000_000, 7_000_000, 4096),
        event("all_reduce/ring", "comm", 4_000_000, 8_000_000, 4096)]} for r in range(3)]
    trace = write_chrome(str(tmp_path / "trace.json"), ranks)
    out = tmp_path / "timeline.png"
    assert main(["plot", trace, "-o", str(out)]) == 0
    width, height = png_size(out)
    assert (width, height) == (14 * 130, round((0.5 * 6 + 1.6) * 130))  # 3 ranks × 2 lanes


def test_missing_or_empty_trace_is_a_clear_error(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    assert main(["plot", str(tmp_path / "absent.json")]) == 2
    assert "absent.json" in capsys.readouterr().err
    empty = write_chrome(str(tmp_path / "empty.json"), [{"rank": 0, "origin_ns": 0,
                                                         "events": []}])
    assert main(["plot", empty]) == 2
    assert "no regions" in capsys.readouterr().err
