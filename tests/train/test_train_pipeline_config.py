"""The pipeline flags: their defaults, and one error listing every reason a pipeline cannot run
on the world it was launched on, before any message."""

from types import SimpleNamespace

import pytest

from scratchpar.train import ConfigError, load_config
from scratchpar.train.strategies.schedule_flags import schedule_problems

PIPE = ["--strategy", "pipeline"]


def problems(argv, world_size):
    with pytest.raises(ConfigError) as err:
        load_config(argv, world_size=world_size)
    return err.value.problems


def test_defaults_fill_the_mesh_and_the_micro_batches():
    t = load_config([*PIPE, "--pp", "2"], world_size=4).train
    assert (t.pp, t.dp, t.pp_schedule, t.m, t.virtual, t.balance) == \
        (2, None, "1f1b", 4, 1, "params")
    assert load_config([*PIPE, "--pp-schedule", "naive", "--pp", "4"], world_size=4).train.m == 1
    t = load_config([*PIPE, "--pp", "2", "--dp", "2", "--pp-schedule", "interleaved",
                     "--virtual", "2", "--microbatches", "4", "--tie-embeddings"], world_size=4)
    assert (t.train.dp, t.train.m, t.model.tie_embeddings) == (2, 4, True)


def test_every_pipeline_problem_is_listed_at_once():
    found = problems([*PIPE, "--pp", "8", "--pp-schedule", "interleaved", "--microbatches", "6",
                      "--model", "lstm", "--n-layers", "1", "--tie-embeddings"], world_size=4)
    assert found == [
        "--tie-embeddings ties the GPT's head to its embedding; model lstm has no such pair",
        "--pp 8 does not divide the world of 4 ranks into replicas of the pipeline; launch a "
        "multiple of 8 ranks",
        "--pp-schedule interleaved needs --virtual 2 or more model chunks per rank (got 1)",
        "--pp 8 × --virtual 1 = 8 stages, but model lstm lists only 3 layers to split"]


@pytest.mark.parametrize("argv, world, message", [
    (["--pp", "2", "--dp", "3"], 4, "--dp 3 × --pp 2 = 6 ranks, but the world has 4"),
    (["--pp-schedule", "naive", "--microbatches", "2"], 1,
     "--pp-schedule naive runs one micro-batch: --microbatches must be 1 (got 2)"),
    (["--pp", "2", "--batch-size", "6", "--microbatches", "4", "--dp", "2"], 4,
     "--batch-size 6 over 2 replicas leaves 3 rows for the smallest; it cannot split "
     "into --microbatches 4 (give --batch-size at least 8)"),
    (["--pp-schedule", "pipedream", "--tie-embeddings"], 1,
     "--tie-embeddings with --pp-schedule pipedream: the two copies would be updated at "
     "different times and drift apart"),
    (["--virtual", "2"], 1, "--virtual 2 applies only to --pp-schedule interleaved"),
    (["--pp", "0", "--microbatches", "-1"], 1, "--pp must be at least 1; got 0"),
    (["--pp", "4", "--model", "mlp", "--source", "classification", "--hidden-sizes", "8"], 4,
     "--pp 4 × --virtual 1 = 4 stages, but model mlp lists only 2 layers to split"),
])
def test_a_pipeline_that_cannot_run_is_refused_with_the_reason(argv, world, message):
    assert any(message in p for p in problems([*PIPE, *argv], world)), problems([*PIPE, *argv],
                                                                                 world)


def test_pipeline_flags_without_the_pipeline_strategy_are_refused():
    assert problems(["--pp", "2", "--microbatches", "4"], 2) == [
        "--pp, --microbatches go with --strategy pipeline or hybrid, not dp"]


@pytest.mark.parametrize("name, p, m, v, reasons", [
    ("gpipe", 0, 4, 1, ["--pp must be at least 1 (got 0)"]),
    ("1f1b", 2, 0, 1, ["--microbatches must be at least 1 (got 0)"]),
    ("naive", 2, 4, 1, ["--pp-schedule naive runs one micro-batch: --microbatches must be 1"]),
    ("interleaved", 4, 6, 1, ["--pp-schedule interleaved needs --virtual 2 or more"]),
    ("1f1b", 4, 8, 2, ["--virtual 2 applies only to --pp-schedule interleaved"]),
    ("pipedream", -1, -1, 3, ["--pp must be", "--microbatches must be", "--virtual 3"]),
    ("zigzag", 4, 8, 1, ["--pp-schedule 'zigzag' is not a schedule; choose one of naive"]),
])
def test_schedule_problems_name_every_violated_flag(name, p, m, v, reasons):
    flags = SimpleNamespace(pp_schedule=name, pp=p, m=m, virtual=v, pp_costs="1:2:1",
                            costs=(1.0, 2.0, 1.0))
    why = schedule_problems(flags)
    assert len(why) == len(reasons)
    for reason, said in zip(reasons, why):
        assert reason in said


@pytest.mark.parametrize("schedule, costs, refused", [
    ("zb-h1", "1:1.8:0.9", None), ("bprio", "1:3:1", None),
    ("zb-h1", "1:2:2", "three finite positive numbers"), ("bprio", "1:inf:1", "finite"),
    ("zb-h1", "1:2", "three finite"), ("bprio", "a:b:c", "three finite"),
    ("1f1b", "1:3:1", "applies to --pp-schedule bprio and zb-h1"),
])
def test_the_costs_bprio_and_zb_h1_are_ordered_by_are_checked(schedule, costs, refused):
    argv = ["--strategy", "pipeline", "--pp", "2", "--pp-schedule", schedule, "--pp-costs", costs]
    if refused is None:
        assert load_config(argv, world_size=2).train.costs == tuple(map(float, costs.split(":")))
    else:
        assert any(refused in why for why in problems(argv, 2))
