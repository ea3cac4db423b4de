"""``python -m scratchpar.bench collectives``: a real 2-rank run end to end, the α-β fit, the
bandwidth conventions and the crossover and target logic."""

import json

import numpy as np
import pytest
from bench_helpers import table_rows

from scratchpar.bench.__main__ import main
from scratchpar.bench.collectives.driver import (
    busbw,
    byte_size,
    crossovers,
    doubling_terms,
    fits,
    human,
    message_rows,
    ring_terms,
    targets,
)
from scratchpar.plan.fit import alpha_beta as fit

KIB, MIB = 1024, 1024 * 1024
CONTENDERS = ["ring", "recursive_doubling", "rabenseifner", "tree", "auto", "mpi", "mpi-ring"]


def timing_rows(out: str) -> set[tuple[str, str, str]]:
    """(n, size, algorithm) of every line of the main table: n, the size, a contender and its
    three figures."""
    rows = set()
    for line in out.splitlines():
        cells = line.split()
        if len(cells) == 7 and cells[0].isdigit() and cells[2] in ("KiB", "MiB") \
                and cells[3] in CONTENDERS:
            rows.add((cells[0], f"{cells[1]} {cells[2]}", cells[3]))
    return rows


def test_quick_run_times_every_algorithm_and_both_mpi_baselines(capsys, tmp_path):
    path = tmp_path / "collectives.json"
    assert main(["collectives", "--quick", "--ranks", "2", "--sizes", "4K,16K",
                 "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert timing_rows(out) == {("2", size, name) for size in ("4 KiB", "16 KiB")
                                for name in CONTENDERS}
    for heading in ("ceilings", "memcpy", "ping-pong", "α-β fit", "crossover"):
        assert heading in out
    result = json.loads(path.read_text())
    assert result["sizes"] == [4 * KIB, 16 * KIB]
    raw = result["per_world_size"]["2"]["raw"]
    assert set(raw) == set(CONTENDERS)
    for name in CONTENDERS:
        for size in ("4096", "16384"):
            assert len(raw[name][size]["samples_s"]) == 2
            assert raw[name][size]["median_s"] == pytest.approx(
                np.median(raw[name][size]["samples_s"]))
            assert 0 < raw[name][size]["median_s"] < 1
    sizes = {human(size): str(size) for size in result["sizes"]}
    for row in result["table"]:  # each row from its raw median, over MPI's default at its size
        seconds = raw[row["algorithm"]][sizes[row["size"]]]["median_s"]
        assert row["us"] == pytest.approx(1e6 * seconds)
        assert row["x_mpi"] == pytest.approx(seconds / raw["mpi"][sizes[row["size"]]]["median_s"])
    ring, auto, bus = result["targets"]
    assert ring["verdict"] == "n/a (no size in range)"  # no size ≥ 1 MiB in this run
    autos = {r["size"]: r["x_mpi"] for r in result["table"] if r["algorithm"] == "auto"}
    assert auto["measured"] == max(autos.values()) and autos[auto["at"]] == auto["measured"]
    memcpy = result["memcpy"]["bytes"] / result["memcpy"]["seconds"]  # bytes a second
    assert bus["at"] == "16 KiB" and bus["measured"] == pytest.approx(
        busbw(16 * KIB, raw["ring"]["16384"]["median_s"], 2) / memcpy)
    printed = [" ".join(r) for r in table_rows(out, "targets (docs/collectives.md")]
    assert [line.endswith(f" {t['at']} {t['verdict']}") for line, t in
            zip(printed, result["targets"], strict=True)] == [True] * 3
    assert {f["model"] for f in result["fits"]} == {"ring", "recursive_doubling"}
    pingpong = result["per_world_size"]["2"]["pingpong"]
    assert max(map(int, pingpong)) == 16 * KIB and pingpong[str(16 * KIB)] > 0  # the largest
    assert "one message one way" in out  # the Communicator's against MPI's own send and recv
    assert [(m["size"], m["target"]) for m in result["messages"]] == [("8 B", "≤ 1.3"),
                                                                      ("4 KiB", "≤ 1.2")]
    pairs = result["per_world_size"]["2"]["messages"]  # each way's median seconds
    printed = table_rows(out, "one message one way")
    for m, line, (size, pair) in zip(result["messages"], printed, pairs.items(), strict=True):
        assert m["size"] == human(int(size)) and line[-1] == m["verdict"]
        assert m["send/recv µs"] == pytest.approx(1e6 * pair["scratchpar"])
        assert m["MPI_Send/Recv µs"] == pytest.approx(1e6 * pair["mpi"])
        assert m["ratio"] == pytest.approx(pair["scratchpar"] / pair["mpi"])


def test_a_message_is_judged_by_its_size_s_bound():
    pair = {"scratchpar": 1.25e-6, "mpi": 1e-6}
    rows = message_rows({2: {"messages": {"8": pair, "4096": pair}}}, "cpu")
    assert [(r["size"], r["target"], r["verdict"]) for r in rows] == [
        ("8 B", "≤ 1.3", "PASS"), ("4 KiB", "≤ 1.2", "MISS")]
    assert rows[0]["ratio"] == pytest.approx(1.25)
    assert rows[0]["send/recv µs"] == pytest.approx(1.25)
    at = message_rows({2: {"messages": {"4096": {"scratchpar": 1.2, "mpi": 1.0}}}}, "cpu")
    assert at[0]["verdict"] == "PASS"  # the bound itself meets it
    assert {r["verdict"] for r in message_rows({2: {"messages": {"8": pair}}}, "double")} == {
        "n/a (double)"}


@pytest.mark.parametrize("p", [2, 3, 4, 8])
def test_fit_recovers_alpha_and_beta_of_synthetic_timings(p):
    alpha, beta = 7e-6, 2.5e-10  # 7 µs per message, 4 GB/s
    sizes = [4 * KIB * 4 ** k for k in range(8)]
    for terms in (ring_terms, doubling_terms):
        exact = [m * alpha + b * beta for m, b in (terms(s, p) for s in sizes)]
        got = fit([terms(s, p) for s in sizes], exact)
        assert got["alpha_s"] == pytest.approx(alpha, rel=1e-9)
        assert got["beta_s_per_byte"] == pytest.approx(beta, rel=1e-9)
        assert got["rms_rel_residual"] < 1e-9
        noise = np.random.default_rng(p).uniform(0.97, 1.03, len(sizes))  # ±3 % on every time
        noisy = fit([terms(s, p) for s in sizes], list(np.array(exact) * noise))
        assert noisy["alpha_s"] == pytest.approx(alpha, rel=0.15)
        assert noisy["beta_s_per_byte"] == pytest.approx(beta, rel=0.05)
        assert 0.005 < noisy["rms_rel_residual"] < 0.03


def test_one_message_size_fits_nothing_and_two_fit_every_model():
    times = {name: {4 * KIB: 1e-5, 64 * KIB: 3e-5} for name in ("ring", "recursive_doubling")}
    results = {2: {"times": times}}
    assert fits(results, [4 * KIB]) == []  # α and β from one point: any split fits it
    fitted = fits(results, [4 * KIB, 64 * KIB])
    assert {f["model"] for f in fitted} == {"ring", "recursive_doubling"}
    assert all(f["alpha_s"] > 0 and f["beta_s_per_byte"] > 0 for f in fitted)


def test_cost_model_terms_count_messages_and_bytes():
    assert ring_terms(1000, 4) == (6, 1500)  # 2(p−1) messages carrying 2(p−1)/p·N bytes
    assert ring_terms(1000, 2) == (2, 1000)
    assert doubling_terms(1000, 4) == (2, 2000)  # log₂ p exchanges of the whole buffer
    assert doubling_terms(1000, 8) == (3, 3000)
    assert doubling_terms(1000, 3) == (3, 3000)  # fold, one exchange, unfold
    assert doubling_terms(1000, 6) == (4, 4000)


def test_bandwidths_follow_nccl_conventions():
    assert busbw(64 * MIB, 0.01, 2) == pytest.approx(6710886400.0)  # N/t: 2(p−1)/p = 1
    assert busbw(1e9, 1.0, 4) == pytest.approx(1.5e9)
    assert busbw(1e9, 1.0, 8) == pytest.approx(1.75e9)


def synthetic(times_by_name: dict[str, list[float]], sizes: list[int]) -> dict:
    return {4: {"times": {name: dict(zip(sizes, ts)) for name, ts in times_by_name.items()}}}


def test_crossover_and_targets_read_the_right_sizes():
    sizes = [4 * KIB, 64 * KIB, MIB, 64 * MIB]
    results = synthetic({
        "ring": [30e-6, 60e-6, 500e-6, 0.01],
        "recursive_doubling": [10e-6, 50e-6, 700e-6, 0.05],
        "tree": [12e-6, 70e-6, 800e-6, 0.06],
        "auto": [11e-6, 52e-6, 510e-6, 0.0101],
        "mpi": [5e-6, 50e-6, 600e-6, 0.02],
        "mpi-ring": [6e-6, 40e-6, 650e-6, 0.012],
    }, sizes)
    (cross,) = crossovers(results, sizes)
    assert cross["recursive doubling beats ring up to"] == "64 KiB"
    assert cross["MPI's own fastest at"] == "4 KiB, 64 KiB"
    ring, auto, bus = targets(results, sizes, memcpy_bytes_per_s=10e9, device="cpu")
    assert ring["measured"] == pytest.approx(5 / 6) and ring["at"] == "1 MiB"  # worse than 1/2
    assert ring["verdict"] == "PASS"
    assert auto["measured"] == pytest.approx(2.2) and auto["at"] == "4 KiB"
    assert auto["verdict"] == "MISS"
    assert bus["measured"] == pytest.approx(busbw(64 * MIB, 0.01, 4) / 10e9)
    assert bus["verdict"] == "PASS"


def test_sizes_parse_and_print_in_binary_units():
    assert [byte_size(s) for s in ("4096", "4K", "64M", "1g")] == [4096, 4 * KIB, 64 * MIB,
                                                                 1024 * MIB]
    assert [human(n) for n in (4 * KIB, 64 * MIB, 12, None)] == ["4 KiB", "64 MiB", "12 B", "-"]
    with pytest.raises(Exception, match="multiple of 4"):
        byte_size("6")


def test_device_run_reduces_device_buffers_and_says_how_mpi_reads_them(capsys, tmp_path):
    """The GPU path in CI: every contender, MPI's own included, on the double's device buffers
    (staged through pinned host memory: the wheel's MPICH is not CUDA-aware)."""
    path = tmp_path / "collectives.json"
    assert main(["collectives", "--quick", "--ranks", "2", "--sizes", "4K,16K", "--device",
                 "double", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("collectives benchmark on double (")
    assert "buffers: MPI is not CUDA-aware: device buffers are staged" in out
    assert "then waits for the device" in out
    assert timing_rows(out) == {("2", size, name) for size in ("4 KiB", "16 KiB")
                                for name in CONTENDERS}
    assert "copy device → pinned host (n=2, rank 0)" in out
    assert "copy pinned host → device (n=2, rank 0)" in out
    result = json.loads(path.read_text())
    assert result["device"].startswith("double") and result["cuda_aware"] is False
    copies = result["per_world_size"]["2"]["copies"]
    assert copies["bytes"] == 16 * KIB and copies["to_host_s"] > 0 and copies["to_device_s"] > 0
    assert {t["verdict"] for t in result["targets"]} == {"n/a (double)"}
