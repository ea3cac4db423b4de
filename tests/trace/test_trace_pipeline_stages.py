"""``python -m scratchpar.trace pipeline TRACE`` draws each stage's computes from a pipeline's
trace, and says so when a trace has none."""

import pytest
from test_trace_timeline_plot import event, png_size

from scratchpar.trace.__main__ import main
from scratchpar.trace.chrome import write_chrome
from scratchpar.trace.pipeline_plot import measured_spans


def test_the_stages_of_a_pipeline_trace_are_drawn_one_row_per_rank(tmp_path):
    pytest.importorskip("matplotlib")
    ranks = [{"rank": r, "origin_ns": 0, "events": [
        event("F0", "compute", r * 1_000_000, (r + 1) * 1_000_000),
        event("SEND_ACT 0→1", "comm", (r + 1) * 1_000_000, (r + 1) * 1_000_000 + 10),
        event("B0", "compute", 8_000_000 - r * 2_000_000, 10_000_000 - r * 2_000_000),
        event("STEP", "compute", 10_000_000, 11_000_000)]} for r in range(3)]
    trace = write_chrome(str(tmp_path / "trace.json"), ranks)
    assert measured_spans(trace)[2] == [("F0", 2.0, 3.0), ("B0", 4.0, 6.0), ("STEP", 10.0, 11.0)]
    out = tmp_path / "stages.png"
    assert main(["pipeline", trace, "-o", str(out)]) == 0
    assert png_size(out) == (14 * 110, round((0.45 * 3 + 1.4) * 110))


def test_a_trace_without_pipeline_computes_is_refused_with_a_reason(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    ranks = [{"rank": 0, "origin_ns": 0, "events": [event("forward", "compute", 0, 5)]}]
    trace = write_chrome(str(tmp_path / "trace.json"), ranks)
    assert main(["pipeline", trace, "-o", str(tmp_path / "x.png")]) == 2
    assert "no pipeline computes" in capsys.readouterr().err
