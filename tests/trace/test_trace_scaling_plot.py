"""The scaling picture is drawn from a dp benchmark JSON; a file not like one is a clear error."""

import json
import struct

import pytest

from scratchpar.bench.dp.plot import read_scaling
from scratchpar.trace.__main__ import main

BATCHES = [4, 8, 16]
CONTENDERS = ["bucketed", "naive", "compute-only", "torch-ddp", "alone", "torch-alone"]
BASELINE = {"bucketed": "alone", "naive": "alone", "compute-only": "alone",
            "torch-ddp": "torch-alone"}


def step_s(n: int, b: int, k: int) -> float:
    """Made-up step times: compute grows with the batch, communication with the world; the
    one-device baselines (k = 4, 5) differ from job to job, as a drifting machine's do."""
    return 1e-3 * (b * (1 + 0.1 * n) if k >= 4 else b + (n - 1) * (2 + k))


def bench_json(tmp_path):
    """A JSON shaped like ``scratchpar.bench dp --json``'s (the parts the plot reads)."""
    jobs = {f"compute@{b}": ["compute", b] for b in BATCHES} | {"deep": ["deep", 2]}
    per_n = {}
    for n in (2, 4):
        configs = {}
        for job, (_, b) in jobs.items():
            configs[job] = {"loss_check": None, "contenders": {
                name: {"median_s": step_s(n, b, k), "samples_s": []}
                for k, name in enumerate(CONTENDERS)}}
        per_n[str(n)] = {"configs": configs}
    path = tmp_path / "dp.json"
    path.write_text(json.dumps({"configs": {"compute": {"sizes": [3, 5, 2]}}, "jobs": jobs,
                                "per_world_size": per_n}))
    return path


def test_efficiency_is_one_rank_time_over_n_rank_time_per_batch(tmp_path):
    curves, world_sizes, sizes = read_scaling(bench_json(tmp_path))
    assert world_sizes == [2, 4] and sizes == [3, 5, 2]
    assert set(curves) == {(n, c) for n in (2, 4) for c in BASELINE}
    for (n, name), curve in curves.items():
        k, base = CONTENDERS.index(name), CONTENDERS.index(BASELINE[name])
        assert list(curve) == BATCHES  # the deep MLP is not part of the sweep
        for b, eff in curve.items():  # against the baseline of the same job
            assert eff == pytest.approx(step_s(n, b, base) / step_s(n, b, k))
    assert curves[(2, "bucketed")][16] > curves[(2, "bucketed")][4]  # more compute per byte


def test_plot_writes_a_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "figs" / "dp_scaling.png"
    assert main(["scaling", str(bench_json(tmp_path)), "-o", str(out)]) == 0
    png = out.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    assert struct.unpack(">II", png[16:24]) == (2 * 5.5 * 120, 4.5 * 120)  # 2 panels × dpi
    assert str(out) in capsys.readouterr().out


@pytest.mark.parametrize("text", ["not json", '{"jobs": {}}',
                                  '{"jobs": {}, "per_world_size": {}}'])
def test_a_file_that_is_not_a_dp_benchmark_is_a_clear_error(tmp_path, capsys, text):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    assert main(["scaling", str(bad), "-o", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"scratchpar.trace: {bad} ")
    assert "Traceback" not in err
    assert not (tmp_path / "x.png").exists()
