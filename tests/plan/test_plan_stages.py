"""A pipeline's stages from the config alone: each layer's parameters as the engine counts them
on the built model, its FLOP, and each stage's share, cut as the engine cuts them."""

import numpy as np
import pytest

from scratchpar.device_rng import DeviceRandom
from scratchpar.parallel.pipeline.partition import parameter_counts, partition
from scratchpar.plan import flops
from scratchpar.plan.stages import flop_shares, parameters
from scratchpar.train import load_config
from scratchpar.train.memory import source_of
from scratchpar.train.task import build_task

RUNS = [
    ["--model", "gpt", "--d-model", "16", "--n-heads", "2", "--n-layers", "3", "--seq-len", "8"],
    ["--model", "gpt", "--d-model", "16", "--n-heads", "2", "--n-layers", "2", "--seq-len", "8",
     "--tie-embeddings"],
    ["--model", "gpt", "--d-model", "16", "--n-heads", "4", "--kv-heads", "2", "--d-ff", "24",
     "--n-layers", "2", "--seq-len", "8"],
    ["--model", "lstm", "--d-model", "8", "--d-hidden", "10", "--n-layers", "2"],
    ["--model", "rnn", "--d-model", "8", "--d-hidden", "10", "--n-layers", "3"],
    ["--model", "mlp", "--source", "classification", "--hidden-sizes", "32,16"],
]


@pytest.mark.parametrize("run", RUNS)
def test_each_layer_holds_the_parameters_the_built_model_holds(run):
    cfg = load_config(run)
    model = build_task(cfg, DeviceRandom(0, 1, 0)).model
    vocab = source_of(cfg).vocab
    assert parameters(cfg, vocab) == parameter_counts(model.pipeline_layers())
    assert len(flops.layers(cfg, vocab)) == len(model.pipeline_layers())
    assert flops.total(flops.layers(cfg, vocab)) == flops.of(cfg, vocab)


@pytest.mark.parametrize("run", RUNS)
def test_a_stage_s_share_is_its_layers_flop_cut_by_parameters(run):
    cfg = load_config(run)
    vocab = source_of(cfg).vocab
    work, counts = flops.layers(cfg, vocab), parameters(cfg, vocab)
    for stages in range(1, len(work) + 1):
        got = flop_shares(cfg, vocab)(4, stages)
        assert len(got) == stages
        assert sum(f for f, _ in got) == pytest.approx(1) and sum(b for _, b in got) == \
            pytest.approx(1)
        for (forward, _), cut in zip(got, partition(counts, stages)):
            assert forward == pytest.approx(sum(work[i].forward for i in cut)
                                            / flops.total(work).forward)


def test_a_gpt_s_ends_hold_many_parameters_and_little_work():
    """Two stages of [embedding, block, block, block, head]: a wide vocabulary's ends weigh as
    much as a block each, so the partition puts two blocks beside an end, and that stage does
    two thirds of the work."""
    cfg = load_config(["--model", "gpt", "--d-model", "8", "--n-heads", "2", "--n-layers", "3",
                       "--seq-len", "4", "--vocab-size", "64"])
    forward = [f for f, _ in flop_shares(cfg, 64)(1, 2)]
    assert max(forward) > 0.6 and np.isclose(sum(forward), 1)
