"""Every layout the training command accepts gets a step from its strategy's cost function:
the dispatch feeds each the right description, compute and links."""

import dataclasses
import math

import pytest

from scratchpar.parallel.pipeline import schedules
from scratchpar.plan import flops
from scratchpar.plan.compute import roofline
from scratchpar.plan.layouts import layouts
from scratchpar.plan.predict import micro_rows, predict, shape_of
from scratchpar.plan.profile import Device, Engine, Link, Profile, Reduce
from scratchpar.plan.step import data_parallel
from scratchpar.train import load_config
from scratchpar.train.memory import source_of
from scratchpar.train.strategies import REGISTRY

RUN = ["--model", "gpt", "--d-model", "32", "--n-layers", "4", "--n-heads", "2",
       "--batch-size", "32", "--seq-len", "16"]
NODE = Link(2e-6, 1e-11)
PROFILE = Profile("by hand", "test", 8, Device("d", 2**34, 1e12, 1e11), NODE, Reduce(1e-12),
                  Engine(2**29), network=Link(2e-5, 1e-10))
LAYOUTS = layouts(RUN, 8)


def rate(cfg, profile=PROFILE):
    work = flops.of(cfg, source_of(cfg).vocab)
    return lambda rows: roofline(work, rows, profile)


def test_every_layout_gets_a_finite_step_made_of_its_parts():
    assert {lay.cfg.train.strategy for lay in LAYOUTS} >= {
        "dp", "dp-naive", "local-sgd", "zero", "pipeline", "hybrid", "ps", "hogwild", "easgd"}
    for lay in LAYOUTS:
        got = predict(lay.cfg, 8, PROFILE, rate(lay.cfg))
        parts = (got.forward_s, got.backward_s, got.update_s, got.exposed_s, got.idle_s)
        assert all(math.isfinite(x) and x >= 0 for x in parts), lay.flags
        assert got.step_s > 0


def test_data_parallel_is_fed_its_own_description_and_its_rank_s_rows():
    lay = next(lay for lay in LAYOUTS if lay.flags == ("--strategy", "dp"))
    described = REGISTRY["dp"].describe(lay.cfg, shape_of(lay.cfg), 8)
    want = data_parallel(described, rate(lay.cfg)(32 // 8), 8, PROFILE)
    sent = sum(m.wire(8) * m.count for m in described.sends)  # every axis here is the world's
    assert predict(lay.cfg, 8, PROFILE, rate(lay.cfg)) == dataclasses.replace(want,
                                                                              sent_bytes=sent)


def test_a_hybrid_s_tensor_and_context_collectives_are_exposed_inside_its_slots():
    for lay in LAYOUTS:
        if lay.cfg.train.strategy != "hybrid":
            continue
        got = predict(lay.cfg, 8, PROFILE, rate(lay.cfg))
        inside = "tp+cp" if lay.cfg.train.cp > 1 else "tp"
        tensor = sum(got.communication_s[f"{inside} {phase}"] for phase in ("forward", "backward"))
        assert tensor > 0 and got.exposed_s >= tensor


def test_a_shard_timed_on_itself_replaces_a_tth_of_the_model_s_compute():
    lay = next(lay for lay in LAYOUTS if lay.cfg.train.strategy == "hybrid"
               and lay.cfg.train.tp > 1)
    t, asked = lay.cfg.train, []
    whole = predict(lay.cfg, 8, PROFILE, lambda rows: (0.03, 0.05))
    shard = predict(lay.cfg, 8, PROFILE, lambda rows: (0.03, 0.05),
                    lambda rows: asked.append(rows) or (0.02, 0.04))
    assert asked and set(asked) == {micro_rows(lay.cfg, 8)}
    assert whole.forward_s == pytest.approx(t.m * 0.03 / (t.pp * t.tp))
    assert shard.forward_s == pytest.approx(t.m * 0.02 / t.pp)
    assert shard.backward_s == pytest.approx(t.m * 0.04 / t.pp)


def test_a_pipeline_s_stages_take_the_shares_they_are_given():
    """Two stages, the second three times the first: its slots set the pace, and the busiest
    rank's compute is three quarters of the model's."""
    lay = next(lay for lay in LAYOUTS if lay.flags == ("--strategy", "pipeline", "--pp", "2",
                                                         "--pp-schedule", "gpipe",
                                                         "--microbatches", "4"))
    t, asked = lay.cfg.train, []
    even = predict(lay.cfg, 8, PROFILE, lambda rows: (0.04, 0.08))
    uneven = predict(lay.cfg, 8, PROFILE, lambda rows: (0.04, 0.08), shares=lambda rows, k: (
        asked.append((rows, k)) or [(0.25, 0.25), (0.75, 0.75)]))
    assert asked == [(micro_rows(lay.cfg, 8), t.pp * t.virtual)]
    assert even.forward_s == pytest.approx(t.m * 0.04 / 2)
    assert uneven.forward_s == pytest.approx(t.m * 0.04 * 0.75)
    assert uneven.step_s > even.step_s


@pytest.mark.parametrize("flags", [("--strategy", "dp"), ("--strategy", "zero",
                                   "--zero-stage", "3", "--offload", "none")])
def test_a_world_wider_than_a_node_takes_the_network(flags):
    lay = next(lay for lay in LAYOUTS if lay.flags == flags)
    inside = predict(lay.cfg, 8, PROFILE, rate(lay.cfg))
    four = dataclasses.replace(PROFILE, ranks_per_node=4)
    across = predict(lay.cfg, 8, four, rate(lay.cfg))
    assert sum(across.communication_s.values()) > 5 * sum(inside.communication_s.values())


def test_a_pipeline_is_priced_in_the_order_its_pp_costs_plan(monkeypatch):
    """zb-h1 ordered by --pp-costs 1:1.5:0.5 is another order than 1:2:1's (the schedules'
    tests), and the prediction prices the one the run would execute."""
    flags = [*RUN, "--strategy", "pipeline", "--pp", "4", "--pp-schedule", "zb-h1",
             "--microbatches", "8"]
    built, real = [], schedules.compute_orders
    monkeypatch.setattr(schedules, "compute_orders",
                        lambda *args: built.append(args) or real(*args))
    for costs in ("1:2:1", "1:1.5:0.5"):
        cfg = load_config([*flags, "--pp-costs", costs], 4)
        assert math.isfinite(predict(cfg, 4, PROFILE, rate(cfg)).step_s)
    assert [args[-1] for args in built] == [(1.0, 2.0, 1.0), (1.0, 1.5, 0.5)]
