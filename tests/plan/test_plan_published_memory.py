"""Megatron-LM's published runs on A100 80GB (Narayanan et al. 2021, Table 1), each at its own
layout, fit the shipped ``dgx-a100`` profile as the paper's did, now that no rank builds,
scores or saves the whole model: the figures ``docs/plan.md`` quotes, per rank, in GiB."""

import pytest

from scratchpar.plan.__main__ import PROFILES
from scratchpar.plan.memory import per_rank
from scratchpar.plan.profile import load
from scratchpar.train import load_config

# name: heads, h, layers, tp, pp, GPUs, global batch; the expected peak per rank (GiB) with
# selective recomputation and sequence parallelism, and with full recomputation
RUNS = {
    "39B": ((64, 8192, 48, 8, 2, 512, 1536), 50.3, 47.3),
    "76B": ((80, 10240, 60, 8, 4, 1024, 1792), 54.5, 49.1),
    "146B": ((96, 12288, 80, 8, 8, 1536, 2304), 60.5, 50.8),
    "310B": ((128, 16384, 96, 8, 16, 1920, 2160), 77.5, 61.0),
    "530B": ((128, 20480, 105, 8, 35, 2520, 2520), 85.5, 60.8),
}
RECOMPUTE = {"selective": ["--recompute", "selective", "--sequence-parallel"],
             "full": ["--recompute", "full"]}


def run(heads, h, layers, tp, pp, gpus, batch) -> list[str]:
    """The paper's layout at micro-batches of one row, fp16 with Adam; a 2,048-symbol
    vocabulary (the synthetic source's largest at order 1)."""
    dp = gpus // (tp * pp)
    return ["--model", "gpt", "--d-model", str(h), "--n-layers", str(layers), "--n-heads",
            str(heads), "--seq-len", "2048", "--batch-size", str(batch), "--vocab-size", "2048",
            "--order", "1", "--precision", "fp16", "--optimizer", "adam", "--strategy", "hybrid",
            "--dp", str(dp), "--pp", str(pp), "--tp", str(tp), "--pp-schedule", "1f1b",
            "--microbatches", str(batch // dp)]


@pytest.mark.parametrize("name", RUNS)
@pytest.mark.parametrize("recompute", RECOMPUTE)
def test_a_published_run_fits_as_it_did(name, recompute):
    layout, *expected = RUNS[name]
    gpus = layout[5]
    cfg = load_config(run(*layout) + RECOMPUTE[recompute], world_size=gpus)
    fit = per_rank(cfg, gpus, load(PROFILES / "dgx-a100.toml"))
    want = expected[list(RECOMPUTE).index(recompute)]
    assert round(fit.need / 2**30, 1) == want, fit.parts
    # a rank's parameters are its share of one stage: at most Ψ/(t·p) and a layer more
    whole = 2 * 12 * layout[1] ** 2 * layout[2]  # the blocks' weights, 16 bits
    assert whole / (layout[3] * layout[4]) < fit.parts["parameters"] < 1.6 * whole / (
        layout[3] * layout[4])
    # the two largest fit only as the paper ran them, recomputing every layer
    assert fit.fits == (name in ("39B", "76B", "146B") or recompute == "full"), fit.why_not()
