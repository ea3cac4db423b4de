"""``python -m scratchpar.bench context``: a tiny run at cp = 1, 2, 4 end to end, its exact
counts against their formulas."""

import numpy as np
import pytest
from bench_helpers import run_quick

from scratchpar.batch.fits import need
from scratchpar.bench.context import driver
from scratchpar.train.memory import PROCESS_BYTES
from scratchpar.train.memory_models import GiB

SCHEMES = ("ring", "allgather", "ulysses")


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The quick run's printed tables, its JSON and its figures' folder."""
    return run_quick("context", tmp_path_factory.mktemp("context-bench"))


def test_the_json_holds_every_table_and_the_figure(quick):
    out, result, folder = quick
    assert result["config"] == driver.QUICK and result["ranks"] == [1, 2, 4]
    for heading in ("1. activations per rank", "2. the longest sequence", "3. causal balance",
                    "4. bytes each rank sends", "5. a training step", "the ring's overlap"):
        assert heading in out
    assert (folder / "context.png").stat().st_size > 0


def test_the_traced_bytes_are_the_traffic_formula_exactly(quick):
    _, result, _ = quick
    rows = result["traffic"]
    assert {(r["cp"], r["scheme"], r["pass"]) for r in rows} == {
        (cp, s + grouped, p) for cp in (2, 4) for s in SCHEMES for grouped in ("", ", grouped")
        for p in ("forward", "backward")}
    for r in rows:
        assert r["sent B"] == r["formula B"] and r["every rank"] is True
    by = {(r["cp"], r["scheme"], r["pass"]): r["sent B"] for r in rows}
    b = driver.QUICK["block"]
    shared = b["heads"] // b["kv_heads"]  # query heads a key/value head
    for cp in (2, 4):
        a = 4 * b["batch"] * b["seq"] // cp * b["d_model"]  # one rank's activation
        for grouped, k in (("", a), (", grouped", a // shared)):  # K (or V): a, or a·G/H
            ring, gather = by[cp, "ring" + grouped, "forward"], by[cp, "allgather" + grouped,
                                                                   "forward"]
            assert ring == gather == 2 * (cp - 1) * k
            assert by[cp, "ulysses" + grouped, "forward"] == 2 * (cp - 1) * (a + k) // cp
            assert by[cp, "ring" + grouped, "backward"] == 2 * (2 * cp - 1) * k  # K, V; dK, dV


def test_activations_match_the_estimate(quick):
    _, result, _ = quick
    rows = {(r["cp"], r["scheme"]): r for r in result["activations"]}
    for (_, scheme), r in rows.items():
        assert r["held B"] == r["estimate B"]  # the ring's fp32 output and lse included
        assert (r["scores B"] == 0) == (scheme == "ring")
    for scheme in SCHEMES:
        held = [rows[1, "one device"]["held B"], rows[2, scheme]["held B"],
                rows[4, scheme]["held B"]]
        assert held == sorted(held, reverse=True) and len(set(held)) == 3
    for cp in (2, 4):
        assert rows[cp, "ring"]["held B"] < rows[cp, "ulysses"]["held B"] \
            < rows[cp, "allgather"]["held B"]


def test_the_longest_sequence_fits_the_budget_and_grows_with_cp(quick):
    _, result, _ = quick
    f = driver.QUICK["fits"]
    have = f["budget_gib"] * GiB - PROCESS_BYTES
    for r in result["fits"]:
        t, cp = r["longest T"], r["cp"]
        assert t % f["grid"] == 0
        assert need(driver.flags(f, cp, r["scheme"], t), cp, 1) <= have < \
            need(driver.flags(f, cp, r["scheme"], t + f["grid"]), cp, 1)
    longest = {(r["cp"], r["scheme"]): r["longest T"] for r in result["fits"]}
    for scheme in SCHEMES:
        assert longest[1, "one device"] < longest[2, scheme] <= longest[4, scheme]


def test_zigzag_balances_exactly_and_contiguous_follows_its_formula(quick):
    _, result, _ = quick
    t = driver.QUICK["balance"]["seq"]
    for r in result["balance"]:
        cp = r["cp"]
        assert sum(r["pairs"]) == t * (t + 1) // 2  # every causal pair, once
        if r["layout"] == "zigzag":
            assert len(set(r["pairs"])) == len(set(r["ring"])) == 1
            assert r["pairs busiest/mean"] == r["ring busiest/mean"] == 1.0
        else:
            assert r["pairs busiest/mean"] == pytest.approx((2 * t - t / cp + 1) / (t + 1))
            assert r["ring busiest/mean"] == pytest.approx(2 * cp / (cp + 1))
        # contiguous: the last rank computes cp whole blocks; zig-zag: its own and half of
        # each other rank's, (cp + 1)/(2cp) of that
        assert r["ring busiest/(T²/cp)"] == pytest.approx(r["its formula"])
        assert r["its formula"] == ((cp + 1) / (2 * cp) if r["layout"] == "zigzag" else 1.0)


def test_the_step_table_is_the_ratio_of_the_medians_and_the_ring_trace_adds_up(quick):
    _, result, _ = quick
    timed, layers = result["timed"], driver.QUICK["gpt"]["layers"]
    one = timed["one device"]["median_s"]
    for r in result["steps"]:
        assert r["speed-up"] == pytest.approx(one / timed[r["scheme"]]["median_s"])
    for r in result["overlap"]:
        # at cp = 2, per layer one block forward and one backward, and two hand-ons
        assert r["K,V blocks"] == 2 * layers and r["hand-ons"] == 2 * layers
        assert 0 <= r["skew ms"] <= r["waited ms"] < r["step ms"]
        assert r["exposed ms"] == pytest.approx(r["waited ms"] - r["skew ms"])
        assert r["alone ms"] == pytest.approx(1e3 * r["K,V blocks"] * result["exchange_s"])
        assert np.isfinite(r["hidden"])
