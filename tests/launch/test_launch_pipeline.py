"""``mpiexec -n 4 python -m scratchpar.train --strategy pipeline``: every schedule trains from the
command line at pp = 4 and at dp = 2 × pp = 2; the synchronous ones as one device does, and their
checkpoints hold the whole model; a trace shows each stage's forwards and backwards."""

import json

import numpy as np
import pytest
from launch_helpers import run_mpi
from test_launch_train import TINY, assert_same_model, one_device, records

SYNC = ["naive", "gpipe", "1f1b", "interleaved", "bprio"]
LAYOUTS = {"pp4": ["--pp", "4"], "dp2xpp2": ["--pp", "2", "--dp", "2"]}
DEEP = ["--n-layers", "6", "--batch-size", "16"]  # 8 pipeline layers: 4 ranks × 2 chunks


def flags(schedule: str, layout: str) -> list[str]:
    chosen = ["--strategy", "pipeline", "--pp-schedule", schedule, *LAYOUTS[layout]]
    if schedule == "interleaved":
        chosen += ["--virtual", "2"]
    return chosen + (["--microbatches", "1"] if schedule == "naive" else [])


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """One device's losses and final parameters for the deeper model."""
    return one_device(tmp_path_factory.mktemp("single"), *DEEP)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("schedule", SYNC)
def test_a_synchronous_schedule_trains_as_one_device(tmp_path, single, schedule, layout):
    metrics, ck = tmp_path / "m.jsonl", tmp_path / "ck"
    out = run_mpi(4, ["-m", "scratchpar.train", *TINY, *DEEP, *flags(schedule, layout),
                      "--metrics", str(metrics), "--save", str(ck)], timeout=90)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("final: step 6") == 1, out.stdout  # rank 0 alone reports
    assert "stage 0: layer" in out.stdout  # and says which layers each stage got
    want, params = single
    np.testing.assert_allclose([r["loss"] for r in records(metrics) if r["event"] == "step"],
                               want, rtol=1e-9)
    assert_same_model(ck, params)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_pipedream_trains_and_records_each_stage_in_the_trace(tmp_path, layout):
    metrics, trace = tmp_path / "m.jsonl", tmp_path / "trace.json"
    out = run_mpi(4, ["-m", "scratchpar.train", *TINY, *DEEP, *flags("pipedream", layout),
                      "--microbatches", "4", "--metrics", str(metrics), "--trace", str(trace)],
                  timeout=90)
    assert out.returncode == 0, out.stderr
    losses = [r["loss"] for r in records(metrics) if r["event"] == "step"]
    assert len(losses) == 6 and all(np.isfinite(losses))
    events = json.loads(trace.read_text())["traceEvents"]
    names = {(e["pid"], e["name"]) for e in events if e.get("ph") == "X"}
    for rank in range(4):
        assert {(rank, "F0"), (rank, "B3"), (rank, "STEP 3")} <= names, sorted(names)[:20]


def test_checkpoints_move_between_pipelines_and_data_parallelism(tmp_path, single):
    """Stop a pipeline halfway, resume as data parallel on 2 ranks; stop data parallelism
    halfway, resume as a 2 × 2 interleaved pipeline: both end where one device ends."""
    want, params = single
    for first, second, n in ((flags("1f1b", "pp4"), ["--strategy", "dp"], 2),
                             (["--strategy", "dp"], flags("interleaved", "dp2xpp2"), 4)):
        ck, metrics = tmp_path / f"ck{n}", tmp_path / f"m{n}.jsonl"
        out = run_mpi(4, ["-m", "scratchpar.train", *TINY, *DEEP, *first, "--stop-after", "3",
                          "--save", str(ck), "--metrics", str(tmp_path / "first.jsonl")],
                      timeout=90)
        assert out.returncode == 0, out.stderr
        out = run_mpi(n, ["-m", "scratchpar.train", *TINY, *DEEP, *second, "--resume", str(ck),
                          "--save", str(ck), "--metrics", str(metrics)], timeout=90)
        assert out.returncode == 0, out.stderr
        losses = [r["loss"] for r in records(metrics) if r["event"] == "step"]
        np.testing.assert_allclose(losses, want[3:], rtol=1e-9)
        assert_same_model(ck, params)


def test_a_mesh_of_one_stage_or_one_tp_rank_says_what_it_amounts_to(tmp_path):
    """A pipeline given no --pp is data parallelism, a hybrid of --tp 1 splits nothing, and an
    LSTM, which has no tensor-parallel form, runs in the hybrid at --tp 1 as a pipeline and is
    refused at --tp 2 before any message."""
    common = ["-m", "scratchpar.train", *TINY, "--metrics", str(tmp_path / "m.jsonl")]
    plain = run_mpi(2, [*common, "--strategy", "pipeline"], timeout=60)
    assert plain.returncode == 0, plain.stderr
    assert "--pp 1: one stage, so each of the 2 replicas holds the whole model: data " \
           "parallelism (give --pp N to split the layers)" in plain.stdout
    lstm = run_mpi(2, [*common, "--model", "lstm", "--strategy", "hybrid", "--pp", "2"],
                   timeout=60)
    assert lstm.returncode == 0, lstm.stderr
    assert "model lstm has no tensor-parallel form, so this runs as --strategy pipeline" \
        in lstm.stdout and "final: step 6" in lstm.stdout
    split = run_mpi(2, [*common, "--model", "lstm", "--strategy", "hybrid", "--tp", "2"],
                    timeout=60)
    assert split.returncode == 2 and "Traceback" not in split.stderr
    assert "--tp 2: model lstm has no tensor-parallel form (gpt and mlp do)" in split.stderr


@pytest.mark.parametrize("strategy", [["pipeline", "--pp", "2"], ["hybrid", "--pp", "2"]])
def test_a_checkpoint_with_an_array_the_model_lacks_is_refused(tmp_path, strategy):
    ck = tmp_path / "ck"
    common = ["-m", "scratchpar.train", *TINY, "--metrics", str(tmp_path / "m.jsonl")]
    assert run_mpi(2, [*common, "--strategy", "dp", "--save", str(ck)],
                   timeout=60).returncode == 0
    meta = json.loads((ck / "meta.json").read_text())
    model = meta["arrays"]["model"]
    model["bogus.weight"] = next(iter(model.values()))  # an array read from another's pieces
    (ck / "meta.json").write_text(json.dumps(meta))
    out = run_mpi(2, [*common, "--strategy", *strategy, "--resume", str(ck)], timeout=60)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.count("the checkpoint has bogus.weight, which the model has not") == 1
