"""Time to a target: each batch's fastest exact layout that fits, times the steps the regimes
give at that batch, ranked; and the command line that asks for it."""

import pytest

from scratchpar.plan.__main__ import main
from scratchpar.plan.profile import load
from scratchpar.plan.rank import exact, ranked
from scratchpar.plan.regimes import Regimes
from scratchpar.plan.target import at_batch, reaches

RUN = ["--model", "gpt", "--d-model", "256", "--n-layers", "4", "--n-heads", "4",
       "--seq-len", "256"]
H100 = load("scratchpar/plan/profiles/dgx-h100.toml")


def test_the_run_s_batch_is_replaced_whichever_way_it_was_given():
    assert at_batch(["--model", "gpt", "--batch-size", "8"], 64) == \
        ["--model", "gpt", "--batch-size", "64"]
    assert at_batch(["--batch-size=8", "--seq-len", "8"], 4) == \
        ["--seq-len", "8", "--batch-size", "4"]
    assert at_batch([], 2) == ["--batch-size", "2"]


def test_each_batch_takes_its_fastest_exact_layout_that_fits_times_its_steps():
    regimes = Regimes(50.0, 4000.0)
    found = reaches(RUN, 8, H100, regimes, [8, 32, 128])
    assert sorted(r.batch for r in found) == [8, 32, 128]
    assert [r.seconds for r in found] == sorted(r.seconds for r in found)
    for r in found:
        want = next(x for x in ranked(at_batch(RUN, r.batch), 8, H100)
                    if x.fit.fits and exact(x.layout.cfg))
        assert r.best.layout.flags == want.layout.flags
        assert r.steps == regimes.steps(r.batch)
        assert r.seconds == pytest.approx(want.step.step_s * (50.0 + 4000.0 / r.batch))


def test_the_command_ranks_batches_and_refuses_a_bad_target(capsys):
    assert main(["--world", "8", "--target", "50,4000", "--batches", "8,32", "--", *RUN]) == 0
    out = capsys.readouterr().out
    assert "time to the target on 8 ranks" in out and "best: mpirun -n 8" in out
    assert out.count("--batch-size") == 1  # the best batch, once
    for bad, why in (("50", "takes S_MIN,E_MIN"), ("50,-1", "positive numbers"),
                     ("a,b", "comma-separated numbers")):
        assert main(["--world", "8", "--target", bad, "--", *RUN]) == 2
        assert why in capsys.readouterr().err
