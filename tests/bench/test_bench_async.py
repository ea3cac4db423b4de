"""``python -m scratchpar.bench async``: a tiny run of every part end to end, its tables, its
JSON and its exact counts (no timing thresholds: those belong to the benchmark)."""

import importlib.util
import math
import os
import statistics

import pytest
from bench_helpers import run_quick, table_rows

from scratchpar.bench.asynchronous import driver as async_report
from scratchpar.bench.asynchronous.driver import MLP, SIZES
from scratchpar.bench.standin import calibration_line

PROBLEMS = ["sparse-logreg", "matrix-factorization", "dense-mlp"]
CONTENDERS = ["serial SGD", "hogwild ×1", "hogwild ×2", "locked ×2"]


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The quick run's printed tables, its JSON and its figures folder."""
    return run_quick("async", tmp_path_factory.mktemp("async-bench"))


def median_round(rounds: list[dict]) -> dict:
    """The round of the lower middle seconds (``statistics.median_low``)."""
    middle = statistics.median_low(r["seconds"] for r in rounds)
    return next(r for r in rounds if r["seconds"] == middle)


def test_every_contender_makes_the_same_updates(quick):
    out, result, _ = quick
    cfg = result["config"]["hogwild"]
    printed = table_rows(out, "1. Hogwild against serial SGD")
    assert [(r[0], " ".join(r[1:3])) for r in printed] == [(p, c) for p in PROBLEMS
                                                           for c in CONTENDERS]
    for row in result["hogwild"]:
        assert math.isfinite(row["final held-out"])
    for problem in PROBLEMS:
        rows = {r["contender"]: r for r in result["hogwild"] if r["problem"] == problem}
        runs = result["results"]["hogwild"][problem]["runs"]  # the same round's runs, paired
        for key, row in rows.items():  # each speed-up: the median of its rounds' paired ratios
            mine = median_round(runs[key])
            assert mine["updates"] == cfg["updates"]
            assert row["run s"] == mine["seconds"]
            assert row["final held-out"] == mine["curve"][-1][2]
            assert row["P"] == len(mine["per_rank_s"]) == int(key.split("×")[-1] if "×" in key
                                                               else 1)
            for column, base in (("× 1 proc", "hogwild ×1"), ("× serial loop", "serial SGD")):
                assert row[column] == pytest.approx(statistics.median(
                    a["seconds"] / b["seconds"] for a, b in zip(runs[base], runs[key])))
        # one Hogwild worker is serial SGD on the same samples, bit for bit
        assert rows["hogwild ×1"]["final held-out"] == rows["serial SGD"]["final held-out"]
        serial = [loss for _, _, loss in median_round(runs["serial SGD"])["curve"]]
        level = serial[0] - async_report.LEVEL * (serial[0] - serial[-1])
        for key, row in rows.items():  # the seconds at the first copy at or below the target
            assert row["target"] == pytest.approx(level)
            curve = median_round(runs[key])["curve"]
            hits = [s for s, _, loss in curve if loss <= level]
            assert row["s to target"] == (hits[0] if hits else None)


def test_the_median_round_and_the_paired_speed_up_on_crafted_rounds():
    rounds = [{"seconds": s} for s in (3.0, 1.0, 2.0, 4.0)]
    assert async_report.typical({"a": rounds})["a"]["seconds"] == 2.0  # the lower middle
    assert async_report.typical({"a": rounds[:3]})["a"]["seconds"] == 2.0
    base = [{"seconds": s} for s in (1.0, 2.0, 3.0)]
    runs = [{"seconds": s} for s in (2.0, 1.0, 6.0)]
    # round by round 0.5, 2, 0.5: the median of the ratios, not the ratio of the medians (1)
    assert async_report.paired(base, runs) == 0.5


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
    two = {r["problem"]: r for r in result["hogwild"] if r["contender"] == "hogwild ×2"}
    assert verdict["speedups"] == {p: two[p]["× 1 proc"] for p in PROBLEMS[:2]}
    assert verdict["over_loop"] == {p: two[p]["× serial loop"] for p in PROBLEMS[:2]}
    speedups = ", ".join(f"{p} {two[p]['× 1 proc']:.2f}×" for p in PROBLEMS[:2])
    assert "target (docs/hogwild.md): Hogwild ×2 ≥ 1.8× Hogwild ×1 (serial SGD) on a sparse " \
        f"problem: {'PASS' if verdict['met'] else 'MISS'} ({speedups}; " in out


def hogwild(name: str, problem: str, vs_one: float, vs_loop: float = 1.0) -> dict:
    return {"contender": name, "problem": problem, "× 1 proc": vs_one, "× serial loop": vs_loop}


def test_the_verdict_counts_hogwild_two_on_a_sparse_problem_alone():
    target = async_report.TARGET
    below = async_report.judged([
        hogwild("hogwild ×1", "sparse-logreg", 9.0), hogwild("locked ×2", "sparse-logreg", 9.0),
        hogwild("hogwild ×2", "sparse-logreg", target - 0.01),
        hogwild("hogwild ×2", "matrix-factorization", 1.2),
        hogwild("hogwild ×2", "dense-mlp", 3.0)])
    assert below["speedups"] == {"sparse-logreg": target - 0.01, "matrix-factorization": 1.2}
    assert below["met"] is False  # ×1's, locked's and the dense problem's speed-ups do not count
    at = async_report.judged([hogwild("hogwild ×2", "sparse-logreg", 1.0, 0.4),
                              hogwild("hogwild ×2", "matrix-factorization", target, 2.5)])
    assert at["met"] is True and at["target"] == target
    assert at["over_loop"] == {"sparse-logreg": 0.4, "matrix-factorization": 2.5}


def test_collisions_count_every_write(quick):
    out, result, _ = quick
    updates = result["config"]["hogwild"]["updates"]
    assert [r[:2] for r in table_rows(out, "2. colliding writes")] == [[p, "2"] for p in PROBLEMS]
    k = MLP["n_features"] * MLP["hidden"][0] + MLP["hidden"][0] \
        + MLP["hidden"][0] * MLP["n_classes"] + MLP["n_classes"]
    batch, problems = result["config"]["hogwild"]["batch"], result["config"]["hogwild"]["problems"]
    for row in result["collisions"]:
        ranks = result["results"]["hogwild"][row["problem"]]["collisions"][str(row["P"])]
        assert row["writes"] == sum(r["writes"] for r in ranks) == updates  # an update a write
        share = row["colliding writes"]
        assert share == pytest.approx(sum(r["colliding"] for r in ranks) / updates)
        assert 0 <= share <= 1 and 0 <= row["colliding coordinates"] <= 1
        names, shares = row["per parameter"].split()[::2], row["per parameter"].split()[1::2]
        assert names == list(ranks[0]["parameters"])  # "name share" per parameter
        assert all(0 <= float(v) <= 1 for v in shares)
        cfg = problems[row["problem"]]
        if row["problem"] == "dense-mlp":
            assert row["coordinates/write"] == k  # a dense step writes every parameter
        elif row["problem"] == "sparse-logreg":  # b samples' nnz distinct features, and the bias
            assert cfg["nnz"] + 1 <= row["coordinates/write"] <= batch * cfg["nnz"] + 1
        else:  # a user's row and an item's row of the rank a sample, 1 to b distinct of each
            assert 2 * cfg["rank"] <= row["coordinates/write"] <= 2 * batch * cfg["rank"]


def test_easgd_and_downpour_exchange_every_tau_steps(quick):
    out, result, _ = quick
    cfg = result["config"]["tau"]
    steps, workers = cfg["steps"], cfg["workers"]
    assert [int(r[0]) for r in table_rows(out, "3. asynchronous EASGD")] == cfg["taus"]
    runs, (first, last) = result["results"]["tau"]["runs"], (cfg["taus"][0], cfg["taus"][-1])
    drift = {m: runs[f"{m} {last}"]["curve"][-1][2] / runs[f"{m} {first}"]["curve"][-1][2]
             for m in ("EASGD", "Downpour")}  # the final loss at the largest τ over the smallest
    assert f"stability: initial held-out loss {runs[f'EASGD {first}']['curve'][0][2]:.3f}; " \
        f"from τ = {first} to τ = {last} EASGD's final loss changes ×{drift['EASGD']:.2f}, " \
        f"Downpour's ×{drift['Downpour']:.2f}" in out
    for row in result["tau"]:
        tau = row["τ"]
        assert row["EASGD exchanges"] == workers * math.ceil(steps / tau)  # at t mod τ = 0
        assert row["Downpour pushes"] == workers * steps // tau  # after steps τ, 2τ, …
        # the finals from the master's held-out curves
        easgd, downpour = (runs[f"{m} {tau}"]["curve"][-1][2] for m in ("EASGD", "Downpour"))
        assert row["EASGD final"] == easgd and row["Downpour final"] == downpour
    for run in runs.values():
        assert run["curve"][0][1] == 0 and run["curve"][-1][1] == steps


def test_the_round_robin_master_time_adds_up(quick):
    out, result, _ = quick
    printed = table_rows(out, "4. round-robin EASGD")
    assert [r[:2] for r in printed] == [["1", "real"], ["1", "stand-in"], ["2", "stand-in"],
                                        ["3", "stand-in"]]
    for row, raw in zip(result["round_robin"], result["results"]["round_robin"], strict=True):
        assert row["steps"] == raw["steps"] == result["config"]["round_robin"]["steps"]
        assert (row["G"], row["compute"]) == (raw["workers"], raw["compute"])
        assert row["steps/s"] == pytest.approx(raw["steps"] / raw["seconds"])
        for k in ("pack", "update", "wait"):  # the master's seconds in each, over its run's
            assert row[k] == pytest.approx(raw[k] / raw["seconds"])
        assert row["busy"] == pytest.approx((raw["pack"] + raw["update"]) / raw["seconds"])
        parts = [row[k] for k in ("pack", "update", "wait")]  # disjoint spans of its run
        assert all(0 <= p <= 1 for p in parts) and sum(parts) <= 1 + 1e-9
    calib = result["calibration"]  # the stand-in's MLP, timed on the round-robin batch
    assert (calib["sizes"], calib["rows"]) == (SIZES, result["config"]["round_robin"]["batch"])
    assert calibration_line("round-robin", calib) in out.splitlines()


def test_figures_are_written(quick):
    _, result, figures = quick
    if importlib.util.find_spec("matplotlib") is None:
        assert result["figures"] == []
        return
    assert sorted(os.path.basename(f) for f in result["figures"]) == sorted(
        ["async_hogwild_speedup.png", "async_hogwild_loss.png", "async_easgd_tau.png",
         "async_round_robin_busy.png"])
    assert all((figures / os.path.basename(f)).stat().st_size > 0 for f in result["figures"])
