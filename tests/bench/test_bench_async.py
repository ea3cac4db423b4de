"""``python -m scratchpar.bench async``: a tiny run of every part end to end, its tables, its
JSON and its exact counts (no timing thresholds: those belong to the benchmark)."""

import importlib.util
import math
import os
import statistics

import pytest
from bench_helpers import run_quick, table_rows

from scratchpar.bench.asynchronous import driver as async_report
from scratchpar.bench.asynchronous.driver import MLP, processes

PROBLEMS = ["sparse-logreg", "matrix-factorization", "dense-mlp"]
CONTENDERS = ["serial SGD", "hogwild ×1", "hogwild ×2", "locked ×2"]


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The quick run's printed tables, its JSON and its figures folder."""
    return run_quick("async", tmp_path_factory.mktemp("async-bench"))


def test_every_contender_makes_the_same_updates(quick):
    out, result, _ = quick
    cfg = result["config"]["hogwild"]
    printed = table_rows(out, "1. Hogwild against serial SGD")
    assert [(r[0], " ".join(r[1:3])) for r in printed] == [(p, c) for p in PROBLEMS
                                                           for c in CONTENDERS]
    for row in result["hogwild"]:
        assert row["updates"] == cfg["updates"]
        assert row["samples_per_s"] == pytest.approx(row["updates_per_s"] * cfg["batch"])
        assert row["updates_per_s"] > 0 and math.isfinite(row["final"])
    for problem in PROBLEMS:
        rows = {r["key"]: r for r in result["hogwild"] if r["problem"] == problem}
        assert rows["serial"]["vs_loop"] == 1.0 and rows["hogwild1"]["vs_one"] == 1.0
        runs = result["results"]["hogwild"][problem]["runs"]  # the same round's runs, paired
        assert rows["hogwild2"]["vs_one"] == pytest.approx(statistics.median(
            a["seconds"] / b["seconds"] for a, b in zip(runs["hogwild1"], runs["hogwild2"])))
        # one Hogwild worker is serial SGD on the same samples, bit for bit
        assert rows["hogwild1"]["final"] == rows["serial"]["final"]
        assert rows["hogwild1"]["to_level"] is not None  # serial SGD reaches its own target


def test_every_run_is_copied_from_start_to_end(quick):
    _, result, _ = quick
    cfg = result["config"]["hogwild"]
    for problem in result["results"]["hogwild"].values():
        for rounds in problem["runs"].values():
            assert len(rounds) == cfg["rounds"]
            for run in rounds:
                updates = [u for _, u, _ in run["curve"]]
                assert updates[0] == 0 and updates[-1] == cfg["updates"]
                assert updates == sorted(updates)
                assert len(run["curve"]) == cfg["snapshots"] + 2  # the start and the end


def test_the_verdict_judges_hogwild_at_two_processes_on_the_sparse_problems(quick):
    out, result, _ = quick
    verdict = result["verdict"]
    assert sorted(verdict["speedups"]) == sorted(PROBLEMS[:2])
    assert verdict["met"] == any(s >= async_report.TARGET for s in verdict["speedups"].values())
    assert sorted(verdict["over_loop"]) == sorted(PROBLEMS[:2])
    assert "target (docs/hogwild.md): Hogwild ×2 ≥ 1.8× Hogwild ×1 (serial SGD) on a sparse " \
        "problem: " in out


def test_collisions_count_every_write(quick):
    out, result, _ = quick
    updates = result["config"]["hogwild"]["updates"]
    assert [r[:2] for r in table_rows(out, "2. colliding writes")] == [[p, "2"] for p in PROBLEMS]
    k = MLP["n_features"] * MLP["hidden"][0] + MLP["hidden"][0] \
        + MLP["hidden"][0] * MLP["n_classes"] + MLP["n_classes"]
    for row in result["collisions"]:
        assert row["writes"] == updates  # every update is one write
        assert 0 <= row["colliding"] <= 1 and 0 <= row["colliding_coordinates"] <= 1
        assert all(0 <= v <= 1 for v in row["by_parameter"].values())
        if row["problem"] == "dense-mlp":
            assert row["coordinates"] == k  # a dense step writes every parameter
        else:
            assert 0 < row["coordinates"] < 100  # a sparse step writes a few rows


def test_easgd_and_downpour_exchange_every_tau_steps(quick):
    out, result, _ = quick
    cfg = result["config"]["tau"]
    steps, workers = cfg["steps"], cfg["workers"]
    assert [int(r[0]) for r in table_rows(out, "3. asynchronous EASGD")] == cfg["taus"]
    assert "stability: initial held-out loss" in out
    for row in result["tau"]:
        tau = row["tau"]
        assert row["easgd_exchanges"] == workers * math.ceil(steps / tau)  # at t mod τ = 0
        assert row["downpour_exchanges"] == workers * steps // tau  # after steps τ, 2τ, …
        assert row["ratio"] == pytest.approx(row["downpour_final"] / row["easgd_final"])
    for run in result["results"]["tau"]["runs"].values():
        assert [k for k, _ in run["curve"]][0] == 0 and run["curve"][-1][0] == steps


def test_the_round_robin_master_time_adds_up(quick):
    out, result, _ = quick
    printed = table_rows(out, "4. round-robin EASGD")
    assert [r[:2] for r in printed] == [["1", "real"], ["1", "stand-in"], ["2", "stand-in"],
                                        ["3", "stand-in"]]
    for row in result["round_robin"]:
        assert row["steps"] == result["config"]["round_robin"]["steps"]
        assert row["steps_per_s"] > 0
        parts = [row[k] for k in ("pack", "update", "wait")]
        assert all(0 <= p <= 1 for p in parts) and sum(parts) <= 1 + 1e-9
        assert row["busy"] == pytest.approx(row["pack"] + row["update"])


def test_figures_are_written(quick):
    _, result, figures = quick
    if importlib.util.find_spec("matplotlib") is None:
        assert result["figures"] == []
        return
    assert sorted(os.path.basename(f) for f in result["figures"]) == sorted(
        ["async_hogwild_speedup.png", "async_hogwild_loss.png", "async_easgd_tau.png",
         "async_round_robin_busy.png"])
    assert all((figures / os.path.basename(f)).stat().st_size > 0 for f in result["figures"])


def test_process_counts_double_up_to_the_ranks():
    assert processes(2) == [1, 2]
    assert processes(6) == [1, 2, 4, 6]
    assert processes(8) == [1, 2, 4, 8]


def test_the_first_copy_at_or_below_the_target_is_taken():
    curve = [[0.0, 0, 1.0], [0.5, 10, 0.6], [1.0, 20, 0.4], [1.5, 30, 0.3]]
    assert async_report.reached(curve, 0.4) == 1.0
    assert async_report.reached(curve, 0.1) is None
