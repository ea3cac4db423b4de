"""A layout's memory per rank is the training command's estimate, expected and bounded, set
against the profile's device: ZeRO-3 needs less than DP, and what does not fit says why."""

import dataclasses

from scratchpar.plan.layouts import layouts
from scratchpar.plan.memory import per_rank
from scratchpar.plan.profile import Device, Engine, Link, Profile, Reduce
from scratchpar.train import load_config
from scratchpar.train.memory import estimate

RUN = ["--d-model", "256", "--n-heads", "4", "--n-layers", "8", "--batch-size", "8"]
BIG = Profile("big", "by hand", 8, Device("d", 80 * 2**30, 1e14, 2e12), Link(5e-6, 2e-12),
              Reduce(1e-12), Engine(2**29))


def test_a_layout_needs_the_training_command_s_estimate():
    cfg = load_config(RUN, world_size=4)
    fit = per_rank(cfg, 4, BIG)
    expected = estimate(cfg, 4, bound=False)
    assert fit.parts == expected and fit.bound == sum(estimate(cfg, 4).values())
    assert fit.bound - fit.need == expected["activations"] // 8 > 0  # an op's temporaries
    assert fit.have == 80 * 2**30 - 2**29 and fit.fits and fit.why_not() == ""


def test_a_layout_fits_by_the_bound_the_training_command_refuses_by():
    cfg = load_config(RUN, world_size=4)
    need = per_rank(cfg, 4, BIG)
    between = per_rank(cfg, 4, BIG, budget=2**29 + (need.need + need.bound) // 2)
    assert between.need < between.have < between.bound and not between.fits
    assert per_rank(cfg, 4, BIG, budget=2**29 + need.bound).fits


def test_zero_3_needs_less_than_dp_and_a_small_device_says_why_not():
    found = {layout.flags: layout.cfg for layout in layouts(RUN, 4)}
    dp = per_rank(found[("--strategy", "dp")], 4, BIG)
    zero3 = per_rank(found[("--strategy", "zero", "--zero-stage", "3", "--offload", "none")], 4,
                     BIG)
    assert zero3.need < dp.need
    small = dataclasses.replace(BIG, device=dataclasses.replace(BIG.device,
                                                                memory_bytes=2**29 + 2**20))
    tight = per_rank(found[("--strategy", "dp")], 4, small)
    assert not tight.fits
    assert tight.why_not().startswith(f"needs {tight.bound / 2**30:.1f} GiB per rank, 0.0 GiB "
                                      "available: ")
    assert "is the largest part" in tight.why_not()
