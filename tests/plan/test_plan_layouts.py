"""The layouts the planner weighs are exactly those the training command accepts for the world,
and the line each prints starts that run."""

import shlex

import pytest

from scratchpar.plan.layouts import CHOSEN, candidates, layouts, pinned, without
from scratchpar.train import load_config

RUNS = {"gpt": ["--d-model", "32", "--n-heads", "4", "--n-layers", "2", "--batch-size", "32"],
        "lstm": ["--model", "lstm", "--n-layers", "2", "--batch-size", "16"],
        "mlp": ["--source", "classification", "--hidden-sizes", "64,64", "--batch-size", "8"]}


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("world", [1, 2, 3, 4, 8])
def test_every_printed_line_is_one_the_training_command_accepts(run, world):
    found = layouts(RUNS[run], world)
    assert found, (run, world)
    for layout in found:
        argv = shlex.split(layout.command(world, RUNS[run]))
        assert argv[:6] == ["mpirun", "-n", str(world), "python", "-m", "scratchpar.train"]
        assert load_config(argv[6:], world_size=world) == layout.cfg


def test_what_the_world_or_the_model_cannot_take_is_left_out():
    def strategies(run, world):
        return {layout.flags for layout in layouts(RUNS[run], world)}

    eight = strategies("gpt", 8)
    assert not any("--tp" in f and f[f.index("--tp") + 1] == "8" for f in eight)  # 4 heads
    assert not any("--pp" in f and f[f.index("--pp") + 1] == "8" for f in eight)  # 4 layers
    assert not any(f[1] in ("pipeline", "hybrid", "ps") for f in strategies("gpt", 1))
    lstm = strategies("lstm", 4)
    assert any(f[1] == "pipeline" for f in lstm)
    assert not any("--tp" in f and f[f.index("--tp") + 1] != "1" for f in lstm)  # no tp form
    four = {f[1] for f in strategies("gpt", 4)}
    assert four == {"dp", "dp-naive", "local-sgd", "zero", "pipeline", "hybrid", "ps",
                    "hogwild", "easgd"}
    assert len(strategies("gpt", 4)) < len(list(candidates(4, 32)))  # some were refused


def test_the_mesh_is_also_weighed_at_one_row_a_micro_batch_with_recomputation():
    found = {layout.flags for layout in layouts(RUNS["gpt"], 4)}
    single = [f for f in found if "--recompute" in f]
    assert {f[f.index("--recompute") + 1] for f in single} == {"selective", "full"}
    for f in single:  # a replica's 32 / dp rows, each its own micro-batch
        dp = int(f[f.index("--dp") + 1])
        assert f[f.index("--microbatches") + 1] == str(32 // dp)


def test_every_flag_a_layout_adds_is_one_the_run_may_not_bring():
    added = {flag for flags in candidates(12, 48, sparse=True) for flag in flags
             if flag.startswith("--")}
    assert added - {"--recompute"} == set(CHOSEN) - {"--pp-costs"}
    run = ["--model", "gpt", "--tp=2", "--pp-costs", "1:2:1", "--recompute", "full",
           "--sequence-parallel", "--d-model", "32"]
    assert pinned(run) == {"--tp": "2", "--pp-costs": "1:2:1", "--sequence-parallel": None}
    assert without(run, CHOSEN) == ["--model", "gpt", "--recompute", "full", "--d-model", "32"]


@pytest.mark.parametrize("pins, holds", [
    (["--pp-schedule", "zb-h1"], lambda cfg: cfg.train.pp_schedule == "zb-h1"),
    (["--tp=2", "--sequence-parallel"], lambda cfg: cfg.train.tp == 2
     and cfg.train.sequence_parallel),
    (["--strategy", "zero", "--zero-stage", "3"], lambda cfg: cfg.train.zero_stage == 3),
    (["--microbatches", "8", "--pp-costs", "1:2:1"], lambda cfg: cfg.train.microbatches == 8),
])
def test_a_run_may_pin_what_a_layout_chooses_and_every_layout_then_keeps_it(pins, holds):
    """A pinned flag replaces each layout's own choice, or is added where it makes none; a
    layout whose family does not take it, or of another pinned strategy, is left out, and
    none is weighed twice. Its line names the flag once."""
    free = layouts(RUNS["gpt"], 4)
    found = layouts([*RUNS["gpt"], *pins], 4)
    assert found and len(found) < len(free)
    assert len({layout.flags for layout in found}) == len(found)
    for layout in found:
        assert holds(layout.cfg), layout.flags
        argv = shlex.split(layout.command(4, [*RUNS["gpt"], *pins]))
        assert load_config(argv[6:], world_size=4) == layout.cfg
        assert all(argv.count(flag.split("=")[0]) == 1 for flag in pins if flag[:2] == "--")
    families = {layout.flags[1] for layout in found}
    assert families == ({"zero"} if "zero" in pins else {"pipeline", "hybrid"}
                        if "--pp-schedule" in pins or "--microbatches" in pins else {"hybrid"})
