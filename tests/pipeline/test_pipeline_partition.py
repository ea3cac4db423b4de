"""partition() against brute force; parameter counts, layer times, names and the description."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchpar.nn import GPT, MLP, LSTMLanguageModel
from scratchpar.parallel.pipeline.partition import (
    describe,
    layer_names,
    layer_times,
    parameter_counts,
    partition,
)

weight_lists = st.one_of(st.lists(st.integers(0, 50), min_size=1, max_size=12),
                         st.lists(st.floats(0, 1e3), min_size=1, max_size=12))


def stage_max(weights, cuts) -> float:
    bounds = [0, *cuts, len(weights)]
    return max(math.fsum(weights[a:b]) for a, b in zip(bounds, bounds[1:]))


@settings(max_examples=300, deadline=None)
@given(weights=weight_lists, data=st.data())
def test_partition_is_contiguous_and_optimal_with_the_earliest_cuts(weights, data):
    n = len(weights)
    p = data.draw(st.integers(1, n))
    ranges = partition(weights, p)
    assert len(ranges) == p and all(len(r) > 0 for r in ranges)
    assert [i for r in ranges for i in r] == list(range(n))
    assert all(r.step == 1 for r in ranges)
    cuts = tuple(r.start for r in ranges[1:])
    every = list(itertools.combinations(range(1, n), p - 1))
    best = min(stage_max(weights, c) for c in every)
    assert stage_max(weights, cuts) == best
    assert cuts == min(c for c in every if stage_max(weights, c) == best)
    assert partition(list(weights), p) == ranges  # a pure function


@pytest.mark.parametrize("p", [0, -1, 4])
def test_partition_refuses_impossible_stage_counts(p):
    with pytest.raises(ValueError, match=rf"cannot cut 3 layers into {p} stages: "
                                         r"need 1 ≤ stages ≤ 3 layers"):
        partition([1, 2, 3], p)


def test_partition_balances_a_heavy_layer():
    assert partition([1, 1, 1, 6, 1, 1], 3) == [range(0, 3), range(3, 4), range(4, 6)]


def gpt(tied: bool):
    return GPT(11, 6, d_model=4, n_heads=2, n_layers=2, gen=np.random.default_rng(0),
               tie_embeddings=tied)


def test_parameter_counts_count_a_tied_embedding_in_both_ends():
    model = gpt(tied=True)
    counts = parameter_counts(model.pipeline_layers())
    tok, pos, block = 11 * 4, 6 * 4, model.blocks[0].num_parameters()
    assert counts == [tok + pos, block, block, 2 * 4 + tok]
    assert sum(counts) == model.num_parameters() + tok
    assert parameter_counts(gpt(tied=False).pipeline_layers())[-1] == 2 * 4 + 4 * 11


def test_layer_names():
    assert layer_names(gpt(tied=False)) == ["tok+pos", "blocks.0", "blocks.1", "ln_f+head"]
    assert layer_names(gpt(tied=True))[-1] == "ln_f+tok"
    lstm = LSTMLanguageModel(7, 3, 4, np.random.default_rng(0), n_layers=2)
    assert layer_names(lstm) == ["embed", "layers.0", "layers.1", "head"]
    assert layer_names(MLP([3, 5, 4, 2], np.random.default_rng(0))) == ["0", "2", "4"]


def test_describe():
    names = ["tok+pos", "blocks.0", "blocks.1", "ln_f+head"]
    text = describe([range(0, 3), range(3, 4)], names, [1000, 12345, 12345, 7], "params")
    assert text == ("stage 0: layers 0–2 (tok+pos, blocks.0, blocks.1) · 25,690 params\n"
                    "stage 1: layer 3 (ln_f+head) · 7 params")
    assert describe([range(0, 2)], names, [0.001, 0.00025], "s") == \
        "stage 0: layers 0–1 (tok+pos, blocks.0) · 0.00125 s"


@pytest.mark.parametrize("tied", [False, True])
def test_layer_times_are_one_positive_float_per_layer(tied):
    model = gpt(tied)
    ids = np.random.default_rng(1).integers(0, 11, (2, 6))
    times = layer_times(model.pipeline_layers(), ids, repeats=2)
    assert len(times) == 4 and all(isinstance(t, float) and t > 0 for t in times)
    assert all(p.grad is not None for p in model.parameters())  # backward reached every layer
