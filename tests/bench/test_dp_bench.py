"""``python -m scratchpar.bench dp``: a real 1- and 2-rank run end to end, and its formulas."""

import json

import pytest

from scratchpar.bench import dp
from scratchpar.bench.__main__ import main

CONTENDERS = {"bucketed", "naive", "compute-only"}


def table_rows(out: str, heading: str) -> list[list[str]]:
    """The cells of every row of the table printed under the line starting with ``heading``."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading)) + 3
    rows = []
    for line in lines[start:]:
        if not line.strip():
            break
        rows.append(line.split())
    return rows


@pytest.mark.parametrize("with_torch", [True, False])
def test_quick_run_prints_every_table_and_contender(capsys, tmp_path, monkeypatch, with_torch):
    if with_torch and not dp.torch_available():
        pytest.skip("torch is not installed")
    if not with_torch:
        monkeypatch.setattr(dp, "torch_available", lambda: False)
    path = tmp_path / "dp.json"
    assert main(["dp", "--quick", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    names = {"bucketed", "naive"} | ({"torch-ddp"} if with_torch else set())
    throughput = table_rows(out, "throughput")
    assert {(r[0], r[1]) for r in throughput} == {(n, c) for n in ("1", "2") for c in names}
    assert all(float(r[4]) == 1.0 for r in throughput if r[0] == "1")  # against itself
    assert [r[:2] for r in table_rows(out, "bucketed against naive")] == [["comm", "2"],
                                                                          ["compute", "2"]]
    fractions = table_rows(out, "exposed communication")
    assert {(r[0], r[1], r[2]) for r in fractions} == {
        (c, n, k) for c in ("compute", "comm") for n in ("1", "2") for k in ("bucketed", "naive")}
    assert ("scratchpar (bucketed) against torch DDP" in out) == with_torch
    result = json.loads(path.read_text())
    for n in ("1", "2"):
        for config in ("compute", "comm"):
            timed = result["per_world_size"][n]["configs"][config]
            expected = CONTENDERS | ({"torch-ddp"} if with_torch and config == "compute" else set())
            assert set(timed["contenders"]) == expected
            for times in timed["contenders"].values():
                assert len(times["samples_s"]) == 3 and 0 < times["median_s"] < 5
        check = result["per_world_size"][n]["configs"]["compute"]["loss_check"]
        assert (check is not None) == with_torch
        if with_torch:
            assert [c["step"] for c in check] == [1, 2]
            assert all(c["rel_err"] <= 1e-5 and c["scratchpar"] > 0 for c in check)
    verdicts = [t["verdict"] for t in result["targets"]]
    assert all(v in ("PASS", "MISS") for v in verdicts[:2])
    assert verdicts[2] in (("PASS", "MISS") if with_torch else ("n/a (torch missing)",))
    for verdict in verdicts:
        assert verdict in out


def test_efficiency_is_throughput_over_p_times_one_rank():
    assert dp.efficiency(2000.0, 2, 1000.0) == 1.0
    assert dp.efficiency(1800.0, 2, 1000.0) == pytest.approx(0.9)
    assert dp.efficiency(2000.0, 4, 1000.0) == pytest.approx(0.5)


def test_exposed_fraction_is_the_share_of_the_step_not_spent_computing():
    assert dp.exposed_fraction(0.040, 0.030) == pytest.approx(0.25)
    assert dp.exposed_fraction(0.030, 0.030) == 0.0
    assert dp.exposed_fraction(0.028, 0.030) < 0  # noise can make DP look faster


def test_verdicts_respect_the_direction_of_each_target():
    assert dp.verdict(0.91, 0.90, higher_is_better=True) == "PASS"
    assert dp.verdict(0.89, 0.90, higher_is_better=True) == "MISS"
    assert dp.verdict(0.70, 0.75, higher_is_better=False) == "PASS"
    assert dp.verdict(0.80, 0.75, higher_is_better=False) == "MISS"
    assert dp.verdict(None, 0.75, higher_is_better=False) == "n/a"


def test_world_sizes_must_divide_the_batches():
    with pytest.raises(SystemExit, match="divide the batches"):
        main(["dp", "--quick", "--ranks", "3"])
