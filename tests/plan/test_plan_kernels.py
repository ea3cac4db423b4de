"""The kernel model: at full efficiency, no n½, no launch cost and an endless bandwidth it is
the roofline of plan/flops.py; n½ halves a product's rate at its size; a tp shard does 1/t of
the products; FlashAttention's memory-bound bytes grow with the tokens, materialized scores
with their square; this engine's kernels are counted from its own graph; a profile's [kernels]
table is read and checked."""

import dataclasses

import pytest

from scratchpar import backend
from scratchpar.plan import flops, kernels
from scratchpar.plan.census import WHAT, Passes, census, counted
from scratchpar.plan.kernels import Kernels, gpt_seconds, product_s
from scratchpar.plan.profile import Device, Engine, Link, Profile, ProfileError, Reduce, dump, loads
from scratchpar.train import load_config

RUN = ["--model", "gpt", "--d-model", "64", "--n-layers", "3", "--n-heads", "4",
       "--seq-len", "32", "--vocab-size", "96", "--batch-size", "8", "--precision", "bf16"]
GROUPED = ["--kv-heads", "2", "--d-ff", "96"]  # 2 key/value heads for 4, F 1.5·C
RATE = 1e12


def profile(kind="fused", efficiency=1.0, half=0.0, launch=0.0, bandwidth=float("inf")):
    return Profile("by hand", "test", 8, Device("d", 2**34, RATE, bandwidth), Link(1e-6, 1e-11),
                   Reduce(1e-12), Engine(2**29), kernels=Kernels(kind, efficiency, half, launch))


def test_a_product_runs_at_half_the_rate_at_its_half_size():
    kernels = Kernels("fused", 0.5, half_size=64)
    assert product_s(64, 1024, 4096, RATE, kernels) == pytest.approx(
        2 * 64 * 1024 * 4096 / (RATE * 0.25))
    assert product_s(1e9, 1e9, 1e9, RATE, kernels) == pytest.approx(2e27 / (RATE * 0.5),
                                                                      rel=1e-6)


@pytest.mark.parametrize("grouped", [[], GROUPED])
@pytest.mark.parametrize("kind", ["fused", "engine"])
@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_at_the_limit_the_kernels_are_the_roofline(recompute, kind, grouped):
    cfg = load_config([*RUN, "--recompute", recompute, *grouped])
    work = flops.of(cfg, 96)
    forward, backward = gpt_seconds(cfg, 96, 8, profile(kind))
    assert forward == pytest.approx(8 * work.forward / RATE)
    assert backward == pytest.approx(8 * work.backward / RATE)


def test_a_tensor_parallel_shard_does_a_tp_th_of_the_products():
    cfg = load_config(RUN)
    whole = gpt_seconds(cfg, 96, 8, profile())
    shard = gpt_seconds(cfg, 96, 8, profile(), tp=4)
    assert shard == pytest.approx(tuple(x / 4 for x in whole))


def memory_s(kind: str, seq: int, sp: bool = False, tp: int = 1, flags: tuple = ()) -> float:
    cfg = load_config([*RUN, "--seq-len", str(seq), *flags])
    return sum(gpt_seconds(cfg, 96, 8, profile(kind, bandwidth=1e9), tp, sp)) - sum(
        gpt_seconds(cfg, 96, 8, profile(kind), tp, sp))


def test_flash_moves_bytes_by_the_tokens_and_materialized_scores_by_their_square():
    assert memory_s("flash", 64) == pytest.approx(2 * memory_s("flash", 32))
    assert memory_s("fused", 64) > 2 * memory_s("fused", 32) > 0


def test_sequence_parallelism_moves_less_on_each_tp_rank():
    assert memory_s("flash", 32, sp=True, tp=4) < memory_s("flash", 32, tp=4)


def test_flash_skips_the_masked_half_of_the_attention_products():
    cfg = load_config(RUN)
    core = 4 * 32 * 32 * 64 * 3 * 8  # QKᵀ and AV over 3 layers, 8 sequences (flops.py)
    fused, flash = (gpt_seconds(cfg, 96, 8, profile(kind))[0] for kind in ("fused", "flash"))
    assert fused - flash == pytest.approx(core / 2 / RATE)


def test_a_launch_costs_its_seconds_per_kernel():
    cfg = load_config(RUN)
    base, launched = (sum(gpt_seconds(cfg, 96, 8, profile(launch=s))) for s in (0.0, 1e-3))
    assert launched - base == pytest.approx(3 * (17 + 34) * 1e-3)


def test_a_profile_reads_its_kernels_back_and_refuses_a_bad_kind():
    shipped = profile(efficiency=0.8, half=300.0, launch=5e-6)
    shipped = dataclasses.replace(shipped, device=dataclasses.replace(shipped.device,
                                                                      bytes_per_s=2e12))
    assert loads(dump(shipped)) == shipped
    bad = dump(shipped).replace('kind = "fused"', 'kind = "magic"').replace(
        "efficiency = 0.8", "efficiency = 1.5")
    with pytest.raises(ProfileError) as err:
        loads(bad)
    assert "kernels.kind must be one of engine, fused, flash" in str(err.value)
    assert "kernels.efficiency is a share of the peak" in str(err.value)


def test_the_feed_forward_s_passes_move_bytes_by_its_width():
    """bias-GELU reads and writes F a position on a rank; the keys' width moves no fused pass."""
    def moved(wide: int, kv_heads: int = 4) -> float:
        return memory_s("fused", 32, flags=("--d-ff", str(wide), "--kv-heads", str(kv_heads)))

    assert moved(512) - moved(256) == pytest.approx(2 * (moved(256) - moved(128)))
    assert moved(256) > moved(128) and moved(256, kv_heads=1) == pytest.approx(moved(256))


def test_a_pass_over_the_keys_and_values_moves_g_over_h_of_their_bytes(monkeypatch):
    """Each of the engine's passes is priced by its activation's width: one over the keys and
    values (G·d a position, a tp rank's share of it) moves G/H of multi-head attention's."""
    def moved(groups: int, units: float, tp: int = 1) -> float:
        block = Passes(0, {**dict.fromkeys(WHAT, 0.0), "groups": units})
        monkeypatch.setattr(kernels, "census", lambda dropout, grouped: (block, Passes()))
        return memory_s("engine", 32, tp=tp, flags=("--kv-heads", str(groups)))

    heads = moved(4, 2.0) - moved(4, 0.0)  # a pass writing 2 units of (B·T, G·d), at G = H
    assert heads > 0
    for groups in (2, 1):
        assert moved(groups, 2.0) - moved(groups, 0.0) == pytest.approx(heads * groups / 4)
    assert moved(2, 2.0, tp=2) - moved(2, 0.0, tp=2) == pytest.approx(heads / 4)


def test_grouped_query_attention_adds_views_to_the_engine_s_census_and_no_pass():
    """Q, K and V are views of the fused product's output, grouped or not: no pass reads K
    or V alone, so grouping adds only the views that group the query heads."""
    for dropout in (False, True):
        (plain, plain_ends), (grouped, grouped_ends) = census(dropout), census(dropout, True)
        assert grouped.units == plain.units and grouped.nodes > plain.nodes
        assert grouped_ends == plain_ends
        assert plain.units["wide"] == 1  # the GELU, F a position


@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("dropout", [False, True])
def test_the_census_of_three_blocks_is_the_ends_and_three_blocks(dropout, grouped):
    block, ends = census(dropout, grouped)
    three = counted(3, dropout, grouped)
    assert three.nodes == ends.nodes + 3 * block.nodes
    assert three.units == pytest.approx({k: ends.units[k] + 3 * v for k, v in block.units.items()})
    assert block.units["scores"] >= 3  # scale, mask and softmax each pass over the scores


def test_the_census_counts_the_same_graph_on_a_device():
    here = counted(1, True, True)
    backend.set_device("double")  # as a GPU's planner runs it: the model built on the device
    try:
        there = counted(1, True, True)
    finally:
        backend.set_device("cpu")
    assert (there.nodes, there.units) == (here.nodes, here.units)


def test_the_engine_launches_an_op_per_node_each_way():
    cfg = load_config(RUN)
    block, ends = census(False)
    base, launched = (sum(gpt_seconds(cfg, 96, 8, profile("engine", launch=s)))
                      for s in (0.0, 1e-3))
    assert launched - base == pytest.approx(2 * (3 * block.nodes + ends.nodes) * 1e-3)


def test_the_engine_moves_its_materialized_scores_once_per_pass_and_more_with_dropout():
    cfg = load_config(RUN)
    assert memory_s("engine", 64) > 2 * memory_s("engine", 32) > 0
    dropped = load_config([*RUN, "--dropout", "0.1"])
    slow = profile("engine", bandwidth=1e9)
    assert sum(gpt_seconds(dropped, 96, 8, slow)) > sum(gpt_seconds(cfg, 96, 8, slow))
