"""``python -m scratchpar.bench experts``: a tiny run at ep = 2 and 4 end to end, its exact
counts against their formulas."""

import pytest
from bench_helpers import run_quick

from scratchpar.bench.experts import driver


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The quick run's printed tables, its JSON and its figures' folder."""
    return run_quick("experts", tmp_path_factory.mktemp("experts-bench"))


def test_the_json_holds_every_table_and_the_figure(quick):
    out, result, folder = quick
    assert result["config"] == driver.QUICK and result["ranks"] == [2, 4]
    for heading in ("1. assignments dropped", "the load (busiest", "2. bytes a rank posts",
                    "all-to-all-v, pairwise", "3. quality per FLOP", "4. a sparse GPT's step",
                    "stand-ins sleeping", "5. what rank 0 holds"):
        assert heading in out
    assert (folder / "experts.png").stat().st_size > 0
    assert [r["ranks"] for r in result["sleeping"]] == [2, 4]
    assert all(0 < r["waiting on all-to-all, of ep"] < 1 for r in result["sleeping"])


def test_the_traced_bytes_are_each_rank_s_routes_exactly(quick):
    _, result, _ = quick
    rows = result["traffic"]
    assert {(r["ep"], r["rank"]) for r in rows} == {(2, 0), (2, 1), (4, 0), (4, 1), (4, 2),
                                                    (4, 3)}
    for r in rows:
        assert r["forward B"] == r["routes' B"] + r["counts B"]
        assert r["backward B"] == r["routes' B"] > 0
    for ep in (2, 4):  # the routes of every rank together are the balanced formula's mean
        mine = [r for r in rows if r["ep"] == ep]
        assert sum(r["routes' B"] for r in mine) == pytest.approx(
            sum(r["2(ep−1)/ep·k·T·C·β"] for r in mine), rel=0.5)


def test_each_rank_holds_what_the_description_says(quick):
    _, result, _ = quick
    rows = result["memory"]
    assert {r["ep"] for r in rows} == {1, 2, 4}
    for r in rows:
        assert r["held B"] == r["estimate B"]
    params = {r["ep"]: r["held B"] for r in rows if r["state"] == "parameters"}
    assert params[1] > params[2] > params[4]  # the experts split, the rest replicated


def test_the_drops_are_the_loads_and_no_balance_loss_lets_the_load_grow(quick):
    _, result, _ = quick
    for r in result["drops"]["rows"]:
        assert r["equal"] and r["dropped (measured)"] >= r["dropped (uniform loads)"]
    dropped = [r["dropped (measured)"] for r in result["drops"]["rows"]]
    assert dropped == sorted(dropped, reverse=True)  # more slots, fewer drops
    balanced, free = result["imbalance"]["rows"]
    assert balanced["balance loss α"] > 0 == free["balance loss α"]
    assert 1 <= balanced["load, last quarter"] <= balanced["ceiling E/k"]
    assert {r["data"] for r in result["per_flop"]["rows"]} == {"synthetic", "shakespeare"}
