"""``python -m scratchpar.bench dp``: a real 1- and 2-rank run end to end, and its formulas."""

import json

import numpy as np
import pytest
from bench_helpers import table_rows

from scratchpar.bench.__main__ import main
from scratchpar.bench.dp import driver

CONTENDERS = {"bucketed", "naive", "compute-only", "alone"}


@pytest.mark.parametrize("with_torch", [True, False])
def test_quick_run_prints_every_table_and_contender(capsys, tmp_path, monkeypatch, with_torch):
    if with_torch and not driver.torch_available():
        pytest.skip("torch is not installed")
    if not with_torch:
        monkeypatch.setattr(driver, "torch_available", lambda: False)
    path = tmp_path / "dp.json"
    assert main(["dp", "--quick", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    names = CONTENDERS | ({"torch-ddp", "torch-alone"} if with_torch else set())
    throughput = table_rows(out, "throughput")
    assert {(r[0], r[1]) for r in throughput} == {(b, c) for b in ("4", "8") for c in names}
    alone = {r[0]: float(r[2]) for r in throughput if r[1] == "alone"}
    for row in throughput:  # batch, contender, ms at n=2 (rounded), efficiency at n=2
        if row[1] in ("alone", "torch-alone"):
            assert row[3] == "-"
        elif row[1] != "torch-ddp":  # the ms shown are rounded to 0.01: bound what they allow
            low = (alone[row[0]] - 0.005) / (float(row[2]) + 0.005)
            high = (alone[row[0]] + 0.005) / max(float(row[2]) - 0.005, 1e-9)
            assert low - 0.01 <= float(row[3]) <= high + 0.01, (row, alone[row[0]])
    focus = ["compute@8", "wide", "deep"]
    steps = table_rows(out, "bucketed against naive, and the exposed communication")
    assert [r[:2] for r in steps] == [[j, "2"] for j in focus]
    assert ("scratchpar (bucketed) against torch DDP" in out) == with_torch
    result = json.loads(path.read_text())
    for row in steps:  # MLP, n, naive ms, bucketed ms, ratio, exposed naive, exposed bucketed
        times = result["per_world_size"]["2"]["configs"][row[0]]["contenders"]
        compute = times["compute-only"]["median_s"]
        for name, shown in zip(("naive", "bucketed"), row[5:], strict=True):  # shown to 0.01
            step = times[name]["median_s"]  # (DP step − compute-only) / DP step
            assert float(shown) == pytest.approx((step - compute) / step, abs=0.006), row
    jobs = ["compute@4", "compute@8", "wide", "deep"]
    assert list(result["per_world_size"]) == ["2"]
    for n in ("2",):
        assert list(result["per_world_size"][n]["configs"]) == jobs
        for job in jobs:
            timed = result["per_world_size"][n]["configs"][job]
            assert set(timed["contenders"]) == names
            for times in timed["contenders"].values():
                assert len(times["samples_s"]) == 3 and 0 < times["median_s"] < 5
                assert times["median_s"] == pytest.approx(np.median(times["samples_s"]))
            check = timed["loss_check"]
            assert (check is not None) == with_torch
            if with_torch:
                assert [c["step"] for c in check] == [1, 2]
                assert all(c["abs_err"] <= 1e-4 and c["scratchpar"] > 0 for c in check)
    medians = {job: {name: t["median_s"] for name, t in timed["contenders"].items()}
               for job, timed in result["per_world_size"]["2"]["configs"].items()}
    efficiency, wide, deep, *ddp = result["targets"]  # each measured from the jobs' medians
    assert efficiency["measured"] == pytest.approx(medians["compute@8"]["alone"]
                                                   / medians["compute@8"]["bucketed"])
    for target, job in ((wide, "wide"), (deep, "deep")):
        assert target["measured"] == pytest.approx(medians[job]["bucketed"]
                                                   / medians[job]["naive"])
    assert len(ddp) == 3 and all((t["measured"] is None) != with_torch for t in ddp)
    verdicts = [t["verdict"] for t in result["targets"]]
    assert all(v in ("PASS", "MISS") for v in verdicts[:3])
    assert set(verdicts[3:]) <= ({"PASS", "MISS"} if with_torch else {"n/a (torch missing)"})
    printed = [" ".join(r) for r in table_rows(out, "targets (docs/data_parallel.md")]
    assert [line.endswith(f" 2 {t['verdict']}") for line, t in
            zip(printed, result["targets"], strict=True)] == [True] * 6


def test_pooling_rounds_takes_the_median_of_every_sample():
    def result(samples):
        return {1: {"configs": {"deep": {"loss_check": None, "contenders": {
            "naive": {"median_s": 0.0, "samples_s": samples}}}}}}

    pooled = driver.pool([result([1.0, 2.0, 9.0]), result([3.0, 4.0, 5.0])])
    assert pooled[1]["configs"]["deep"]["contenders"]["naive"] == {
        "median_s": 3.5, "samples_s": [1.0, 2.0, 9.0, 3.0, 4.0, 5.0]}


def test_jobs_name_each_per_rank_batch_of_a_swept_config():
    configs = {"compute": {"sizes": [2, 2], "per_rank": [4, 8], "target": 8},
               "wide": {"sizes": [2, 2], "per_rank": [2]}, "deep": {"sizes": [2], "per_rank": [3]}}
    assert driver.jobs(configs) == {"compute@4": ("compute", 4), "compute@8": ("compute", 8),
                                "wide": ("wide", 2), "deep": ("deep", 3)}
    assert driver.focus(configs) == ["compute@8", "wide", "deep"]


def test_efficiency_is_the_one_device_time_over_the_n_rank_time_of_the_same_job():
    def timed(**medians):
        return {"contenders": {k.replace("_", "-"): {"median_s": v} for k, v in medians.items()}}

    results = {2: {"configs": {"c": timed(alone=0.010, bucketed=0.0125, torch_alone=0.02,
                                          torch_ddp=0.04)}}}
    assert driver.efficiency_of(results, 2, "c", "bucketed") == pytest.approx(0.8)
    assert driver.efficiency_of(results, 2, "c", "torch-ddp") == pytest.approx(0.5)  # torch's own


def test_exposed_fraction_is_the_share_of_the_step_not_spent_computing():
    assert driver.exposed_fraction(0.040, 0.030) == pytest.approx(0.25)
    assert driver.exposed_fraction(0.030, 0.030) == 0.0
    assert driver.exposed_fraction(0.028, 0.030) < 0  # noise can make DP look faster


def test_world_sizes_and_rounds_must_be_positive(capsys):
    for sizes in ("0,2", "-2"):
        with pytest.raises(SystemExit) as refused:
            main(["dp", "--quick", "--ranks", sizes])
        assert refused.value.code == 2
        assert f"every size must be at least 1, got {sizes}" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="must be positive"):
        main(["dp", "--rounds", "0"])


def test_device_run_trains_every_contender_on_the_device(capsys, tmp_path):
    """The GPU path in CI: each rank sets its device from its local rank, models and batches on
    the double, gradients all-reduced from device buffers; with PyTorch, DDP (gloo, its twin on
    the CPU) still agrees on the first losses."""
    path = tmp_path / "dp.json"
    assert main(["dp", "--quick", "--device", "double", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("dp benchmark on double (")
    assert "buffers: MPI is not CUDA-aware: device buffers are staged" in out
    with_torch = driver.torch_available()
    names = CONTENDERS | ({"torch-ddp", "torch-alone"} if with_torch else set())
    assert {(r[0], r[1]) for r in table_rows(out, "throughput")} == {
        (b, c) for b in ("4", "8") for c in names}
    assert ("torch DDP (gloo at N=2)" in out) == with_torch
    result = json.loads(path.read_text())
    assert result["device"].startswith("double")
    run = result["per_world_size"]["2"]
    assert run["cuda_aware"] is False and run["ddp_backend"] == ("gloo" if with_torch else None)
    for timed in run["configs"].values():
        assert set(timed["contenders"]) == names
        assert (timed["loss_check"] is not None) == with_torch
    verdicts = {t["verdict"] for t in result["targets"]}
    assert verdicts <= {"n/a (double)", "n/a (torch missing)"} and "n/a (double)" in verdicts
