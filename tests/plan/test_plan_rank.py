"""``python -m scratchpar.plan``: every layout ranked, fitting first and fastest first, each
command one the training command accepts, and a row's breakdown on request."""

import shlex

import pytest

from scratchpar.plan.__main__ import main
from scratchpar.plan.layouts import Layout
from scratchpar.plan.predict import from_profile, shape_of
from scratchpar.plan.profile import load
from scratchpar.plan.rank import exact, name, ranked
from scratchpar.train.cli import load_config
from scratchpar.train.strategies import REGISTRY

RUN = ["--model", "gpt", "--d-model", "32", "--n-layers", "4", "--n-heads", "2",
       "--batch-size", "32", "--seq-len", "16"]
H100 = load("scratchpar/plan/profiles/dgx-h100.toml")


def test_layouts_that_fit_and_train_as_one_device_come_first_fastest_first():
    rows = ranked(RUN, 8, H100)
    assert all(r.fit.fits for r in rows)  # a small model fits everywhere
    flags = [exact(r.layout.cfg) for r in rows]
    assert flags == sorted(flags, reverse=True) and True in flags and False in flags
    for group in (True, False):
        steps = [r.step.step_s for r in rows if exact(r.layout.cfg) is group]
        assert steps == sorted(steps)
    assert rows[0].per_s == pytest.approx(32 * 16 / rows[0].step.step_s)
    hogwild = next(r for r in rows if r.layout.flags == ("--strategy", "hogwild"))
    assert not exact(hogwild.layout.cfg)


def test_a_tight_budget_puts_every_layout_below_with_why():
    rows = ranked(RUN, 4, H100, budget=H100.engine.process_bytes + 2**20)
    assert rows and not any(r.fit.fits for r in rows)
    assert all("needs" in r.fit.why_not() for r in rows)


def test_layouts_that_do_not_fit_come_closest_first_and_are_timed_when_read():
    rows = ranked(RUN, 4, H100, budget=H100.engine.process_bytes + 2**20)
    flags = [exact(r.layout.cfg) for r in rows]
    assert flags == sorted(flags, reverse=True)
    for group in (True, False):
        needs = [r.fit.need for r in rows if exact(r.layout.cfg) is group]
        assert needs == sorted(needs) and len(set(needs)) > 1
    assert not any("step" in vars(r) for r in rows)  # nothing timed that nobody read
    first = rows[0].step
    assert first.step_s > 0 and rows[0].step is first
    assert first == from_profile(rows[0].layout.cfg, 4, H100)


@pytest.mark.parametrize("extra", [[], ["--recompute", "full"], ["--recompute=none"]])
def test_every_command_is_one_the_training_command_accepts(extra):
    """Each flag once: a layout that sets --recompute again replaces the run's."""
    rows = ranked([*RUN, *extra], 8, H100)
    assert any("--recompute" in row.layout.flags for row in rows)
    for row in rows:
        words = shlex.split(row.layout.command(8, [*RUN, *extra]))
        assert words[:6] == ["mpirun", "-n", "8", "python", "-m", "scratchpar.train"]
        assert load_config(words[6:], world_size=8) == row.layout.cfg
        named = [w.split("=")[0] for w in words if w.startswith("--")]
        assert len(named) == len(set(named)), named


def test_the_bytes_sent_are_the_ring_s_for_data_parallelism():
    row = next(r for r in ranked(RUN, 4, H100) if r.layout.flags == ("--strategy", "dp"))
    described = REGISTRY["dp"].describe(row.layout.cfg, shape_of(row.layout.cfg), 4)
    assert row.step.sent_bytes == pytest.approx(sum(
        m.count * m.nbytes * (2 * 3 / 4 if m.op == "all-reduce" else 1)
        for m in described.sends))


def test_the_command_prints_the_table_and_the_best_line(capsys):
    assert main(["--world", "4", "--top", "5", "--", *RUN]) == 0
    out = capsys.readouterr().out
    assert "layouts on 4 ranks of" in out and "tok/s" in out
    assert out.strip().splitlines()[-1].startswith("best: mpirun -n 4 python -m scratchpar.train")


def test_a_pinned_schedule_is_in_every_row_and_the_best_line(capsys):
    assert main(["--world", "4", "--top", "0", "--", *RUN, "--pp-schedule", "zb-h1"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines()
            if line.strip()[:1].isdigit() and "ranks of" not in line]  # the table's rows
    assert rows and all(" zb-h1 " in row for row in rows)
    best = out.split("best: ")[1]
    assert best.count("--pp-schedule zb-h1") == 1 and "--model" in best


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_describes_the_ranking_and_names_the_two_commands(capsys, flag):
    with pytest.raises(SystemExit) as done:
        main([flag])
    out = capsys.readouterr().out
    assert done.value.code == 0
    for word in ("--world", "--profile", "--explain", "--target", "calibrate", "show"):
        assert word in out


def test_explain_gives_a_row_s_breakdown_and_its_command(capsys):
    assert main(["--world", "4", "--explain", "2", "--", *RUN]) == 0
    out = capsys.readouterr().out
    for word in ("forward", "backward", "update", "exposed", "idle", "memory", "bound",
                 "mpirun -n 4"):
        assert word in out


@pytest.mark.parametrize("argv, said", [
    (["--profile", "nowhere.toml"], "nowhere.toml"),
    (["--world", "0"], "--world must be at least 1"),
    (["--explain", "999"], "--explain takes a row from 1 to"),
    (["--", "--model", "nope"], "--model"),
    (["--", "--model", "gpt", "--strategy", "single"],
     "no layout of this run runs on 4 ranks with --strategy single"),
    (["--", "--model", "gpt", "--tp=3", "--sequence-parallel"],
     "no layout of this run runs on 4 ranks with --tp 3 --sequence-parallel"),
    (["--", "--model", "gpt", "--pp"], "--pp pins a layout's value: give it one"),
])
def test_bad_input_is_refused_with_a_line(capsys, argv, said):
    assert main(argv) == 2
    assert said in capsys.readouterr().err


def test_a_layout_s_short_name_keeps_every_knob_but_the_defaults():
    hybrid = ("--strategy", "hybrid", "--dp", "2", "--pp", "4", "--tp", "2", "--pp-schedule",
              "1f1b", "--microbatches", "8", "--sequence-parallel")
    assert name(Layout(hybrid, None)) == "hybrid dp=2 pp=4 tp=2 1f1b m=8 sp"
    zero = ("--strategy", "zero", "--zero-stage", "3", "--offload", "none")
    assert name(Layout(zero, None)) == "zero stage 3"
    assert name(Layout((*zero[:4], "--offload", "cpu"), None)) == "zero stage 3 offload=cpu"


def test_when_nothing_fits_the_command_recommends_nothing(capsys):
    assert main(["--world", "2", "--memory", "0.6", "--", *RUN]) == 0
    out = capsys.readouterr().out
    assert "best:" not in out and "no layout fits: the closest needs" in out


def test_the_precision_and_the_recomputation_reach_the_prediction():
    """On the datasheet H100, a bf16 step multiplies at the tensor cores' rate and sends half
    the bytes, so it beats fp32's; recomputing adds the forward it runs again (full more than
    selective) and holds fewer activations."""
    def best(*flags: str):
        rows = ranked([*RUN, "--seq-len", "512", *flags], 8, H100)
        return next(r for r in rows if r.layout.flags == ("--strategy", "dp"))

    fp32, bf16 = best(), best("--precision", "bf16")
    assert bf16.step.step_s < fp32.step.step_s and bf16.step.sent_bytes < fp32.step.sent_bytes
    selective, full = best("--recompute", "selective"), best("--recompute", "full")
    assert fp32.step.backward_s < selective.step.backward_s < full.step.backward_s
    assert full.fit.parts["activations"] < selective.fit.parts["activations"] \
        < fp32.fit.parts["activations"]


def test_a_plan_shows_the_layouts_weighed_where_asked(capsys):
    rows = ranked(RUN, 4, H100, shown=True)
    said = capsys.readouterr().err.splitlines()
    assert said[-1].startswith(f"layout {len(rows)}/{len(rows)} (100%)")
    assert len(said) >= 10 and all(line.startswith("layout ") for line in said)
    ranked(RUN, 4, H100)
    assert capsys.readouterr().err == ""
