"""The published runs: each one's flags make a layout the training command accepts on its GPUs;
the FLOP convention is the GPT's own count; the shipped n½ is the fit on the row the profiles
name; and the rows not fitted on, Korthikanti et al.'s 22B among them, are predicted within
the targets of docs/plan.md; the planner's own time is printed beside its target."""

import argparse
import dataclasses

import pytest

from scratchpar.bench.plan.driver import PUBLISHED_TARGETS, against_published, timed_plans
from scratchpar.plan import flops, published
from scratchpar.plan.__main__ import PROFILES
from scratchpar.plan.profile import load


def test_every_run_is_a_layout_of_its_gpus():
    for run in published.runs():
        t = run.config().train
        assert t.tp * t.pp * t.cp * t.dp == run.gpus, run.name


def test_model_flop_is_three_times_the_gpt_s_forward_and_narayanan_s_equation_3():
    per_sequence = flops.gpt(51200, 2048, 6144, 48)
    assert published.model_flop(4, 2048, 48, 6144, 51200) == pytest.approx(
        4 * (per_sequence.forward + per_sequence.backward))
    assert per_sequence.backward == 2 * per_sequence.forward
    b, s, layers, h, v = 4, 2048, 48, 6144, 51200
    assert published.model_flop(b, s, layers, h, v) == pytest.approx(
        72 * b * s * layers * h * h * (1 + s / (6 * h) + v / (12 * layers * h)))


def test_llama_3_s_block_is_priced_at_its_weights_and_its_131k_row_gathers_its_8_kv_heads():
    """GQA over 8 key/value heads and SwiGLU's three matrices of 53,248 as a two-matrix MLP
    of 79,872: 11.875·h² weights a block, 2 FLOP each a token (Dubey et al. 2024, Table 3)."""
    rows = [run for run in published.runs() if run.source == published.LLAMA3]
    assert [run.gpus for run in rows] == [8192, 16384, 16384]
    for run in rows:
        m = run.config().model
        assert (m.n_heads, m.groups, m.wide) == (128, 8, 79872)
        block = flops.layers(run.config(), 128256)[1]
        assert block.weight == 2 * run.config().data.seq_len * 11.875 * m.d_model ** 2
    long = rows[-1].config()
    t = long.train
    assert (t.cp, t.cp_attention, t.tp, t.pp, t.dp, long.data.seq_len, t.batch_size) == (
        16, "allgather", 8, 16, 8, 131072, 128)
    # 380 TFLOP/s a GPU of the model the planner prices: its step's own FLOP
    assert rows[-1].seconds == pytest.approx(128 * flops.of(long, 128256).step / (380e12 * 16384))


def test_the_shipped_half_size_is_the_fit_on_the_row_the_profiles_name():
    a100, h100 = (load(PROFILES / f"{name}.toml") for name in ("dgx-a100", "dgx-h100"))
    assert a100.kernels.half_size == h100.kernels.half_size
    fitted = next(run for run in published.runs() if run.name == published.FITTED)
    assert published.fit_half(fitted, a100) == pytest.approx(a100.kernels.half_size, abs=1)
    slower = dataclasses.replace(a100, kernels=dataclasses.replace(a100.kernels,
                                                                   half_size=800.0))
    assert published.predicted(fitted, slower) > published.predicted(fitted, a100)


def test_the_rows_not_fitted_on_are_predicted_within_the_median_target(capsys):
    result = against_published(argparse.Namespace(device="cpu"))  # bench plan --published
    found = result["rows"]
    assert len(found) == len(published.runs()) and result["fitted"] == published.FITTED
    printed = capsys.readouterr().out
    assert "n½ fitted here" in printed and "median |error| ≤ 10%" in printed
    by_name = {r["run"]: r for r in found}
    for name in ("22B full", "22B selective + SP"):  # Korthikanti et al.'s one node
        assert abs(by_name[name]["error"]) <= PUBLISHED_TARGETS["median"]
    summary = published.errors(found, published.FITTED)
    assert summary["rows"] == len(found) - 1 and summary["median"] <= PUBLISHED_TARGETS["median"]


def test_the_planner_s_own_time_is_printed_beside_its_target(capsys):
    plans = [published.Timed("tiny GPT", 4, "dgx-h100", ("--model", "gpt"), 30.0)]
    rows = timed_plans(argparse.Namespace(device="cpu"), plans)
    assert rows[0]["layouts"] > 10 and rows[0]["seconds"] > 0
    assert "< 30 s" in capsys.readouterr().out
    assert [(t.world, t.seconds) for t in published.timed()] == [(128, 3.0), (3072, 30.0),
                                                                  (3072, 30.0)]
