"""``python -m scratchpar.batch throughput``: every model's sweep measured and drawn, the knee
found where doubling stops paying, and a batch the training command refuses ends the sweep."""

import json

import pytest

from scratchpar.batch import throughput
from scratchpar.batch.__main__ import main
from scratchpar.batch.studies import QUICK_MODELS
from scratchpar.train import ConfigError

PNG = b"\x89PNG\r\n\x1a\n"


def test_the_quick_sweep_measures_every_model_at_every_batch(tmp_path, capsys):
    out, figures = tmp_path / "t.json", tmp_path / "figures"
    assert main(["throughput", "--quick", "--json", str(out), "--figures", str(figures)]) == 0
    found = json.loads(out.read_text())
    assert set(found["sweeps"]) == set(QUICK_MODELS)
    seq = {"gpt": 16, "lstm": 16, "mlp": 1}  # a row's most units: --seq-len tokens, or a sample
    for model, rows in found["sweeps"].items():
        assert [r["batch"] for r in rows] == [1, 2, 4, 8]
        for r in rows:
            assert r["batch"] <= r["units"] <= seq[model] * r["batch"]  # padding: fewer tokens
            assert r["units_per_s"] >= r["rows_per_s"] > 0  # a row holds a unit or more
            if model == "mlp":  # a sample a row: the two rates are one
                assert r["units_per_s"] == pytest.approx(r["rows_per_s"])
    printed = capsys.readouterr().out
    assert printed.count("one device:") == 3 and "× on half the batch" in printed
    assert (figures / "batch_throughput.png").read_bytes()[:8] == PNG


def rows(*pairs):
    return [{"batch": b, "rows_per_s": r} for b, r in pairs]


def test_the_knee_is_the_last_batch_before_doubling_gains_less_than_a_tenth():
    assert throughput.knee(rows((1, 100), (2, 190), (4, 360), (8, 390), (16, 400))) == 4
    assert throughput.knee(rows((1, 100), (2, 190), (4, 360))) is None  # still gaining
    assert throughput.knee(rows((1, 100), (4, 105), (8, 200))) is None  # 1 → 4 is no doubling
    assert throughput.knee([{"batch": 1, "refused": "too big"}]) is None


def test_a_refused_batch_ends_the_sweep_with_its_reason(monkeypatch):
    built = throughput.build_trainer

    def refusing(cfg, comm=None):
        if cfg.train.batch_size >= 4:
            raise ConfigError(["the run needs 9.0 GiB, more than the 8.0 GiB a rank may hold"])
        return built(cfg, comm)

    monkeypatch.setattr(throughput, "build_trainer", refusing)
    found = throughput.sweep(QUICK_MODELS["mlp"], [1, 2, 4, 8], repeats=1, warmup=0, rounds=1)
    assert [r["batch"] for r in found] == [1, 2, 4]
    assert found[-1]["refused"] == "the run needs 9.0 GiB, more than the 8.0 GiB a rank may hold"
    assert all(r["rows_per_s"] > 0 for r in found[:2])
