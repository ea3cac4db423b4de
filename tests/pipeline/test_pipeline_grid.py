"""Schedules drawn as a text grid and as PNGs: the simulated timeline, a measured one, bubbles."""

import struct

import pytest

from scratchpar.parallel.pipeline.grid import format_grid
from scratchpar.parallel.pipeline.schedules import gpipe, interleaved, one_f_one_b
from scratchpar.parallel.pipeline.simulator import simulate
from scratchpar.trace.chrome import write_chrome


def png_size(path) -> tuple[int, int]:
    data = open(path, "rb").read(24)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_gpipe_grid():
    assert format_grid(gpipe(2, 2)) == (
        "rank 0 │ F0 F1 ·  ·  ·  B1 B1 B0 B0\n"
        "rank 1 │ ·  F0 F1 B1 B1 B0 B0 ·  ·\n"
        "9 columns of 1 · makespan 9 · bubble 33.3%")


def test_grid_units_chunks_and_steps():
    rows = format_grid(simulate(interleaved(2, 2, 2), 1, 2, step=0.5)).splitlines()
    assert rows[0].split("│ ")[1].split()[:4] == ["F0", "F1", "F0.1", "F1.1"]  # half units
    assert rows[0].split()[-1] == "S" and rows[-1].startswith("16 columns of 0.5 · makespan 8 ")
    coarse = format_grid(one_f_one_b(2, 2), unit=3).splitlines()
    assert coarse[-1].startswith("3 columns of 3 ")


def event(name, start_ms, end_ms, cat="compute"):
    return {"name": name, "cat": cat, "start": int(start_ms * 1e6), "end": int(end_ms * 1e6),
            "bytes": 0}


def test_measured_spans_keep_pipeline_computes_only(tmp_path):
    pytest.importorskip("matplotlib")
    from scratchpar.trace.pipeline_plot import measured_spans

    ranks = [{"rank": r, "origin_ns": 0, "events": [
        event("F0", 0, 1), event("B0.1", 1, 3), event("STEP 0", 3, 3.5),
        event("forward", 0, 1), event("send/F0", 1, 2, "comm")]} for r in range(2)]
    trace = write_chrome(str(tmp_path / "trace.json"), ranks)
    assert measured_spans(trace) == {r: [("F0", 0.0, 1.0), ("B0.1", 1.0, 3.0),
                                         ("STEP 0", 3.0, 3.5)] for r in range(2)}


def test_plots_write_pngs(tmp_path):
    pytest.importorskip("matplotlib")
    from scratchpar.trace.pipeline_plot import plot_bubble_curve, plot_pipeline_timeline

    ideal = simulate(one_f_one_b(4, 8))
    alone = plot_pipeline_timeline(ideal, str(tmp_path / "ideal.png"))
    measured = {r: [(str(s.action), 1.1 * s.start, 1.1 * s.end) for s in spans
                    if s.action.is_compute] for r, spans in ideal.spans.items()}
    both = plot_pipeline_timeline(ideal, str(tmp_path / "both.png"), measured, "1F1B, p=4")
    assert png_size(both)[1] > png_size(alone)[1] > 0
    rows = [{"schedule": name, "p": 4, "m": m, "bubble": b + 0.01, "formula": b}
            for name in ("gpipe", "1f1b") for m in (4, 8, 16) for b in [3 / (m + 3)]]
    curve = plot_bubble_curve(rows, str(tmp_path / "curve.png"))
    assert png_size(curve)[0] > 0
    with pytest.raises(ValueError, match="no bubble measurements"):
        plot_bubble_curve([], str(tmp_path / "empty.png"))
