"""The memory estimate of a GPT whose key/value heads each serve a group of query heads
(grouped-query attention, Ainslie et al. 2023) and whose feed-forward is F wide: its
parameters are the built model's, whole and on each tensor-parallel rank; a block keeps what
``memory_models.gpt_layer`` counts, K and V G/H of multi-head attention's and the MLP's
arrays F wide; and the estimate bounds what such a run allocates."""

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
from test_train_memory import check_bounds, config

from scratchpar import nn
from scratchpar.autograd import Tensor
from scratchpar.autograd.held import graph_bytes
from scratchpar.device_rng import DeviceRandom
from scratchpar.nn.recompute import chosen, recompute
from scratchpar.parallel.pipeline.partition import parameter_counts
from scratchpar.parallel.tensor.block import ParallelBlock
from scratchpar.train import make_config
from scratchpar.train.memory import network
from scratchpar.train.memory_context import causal_mask
from scratchpar.train.memory_models import Sizes, gpt_layer, tensor_share
from scratchpar.train.memory_parameters import gpt_arrays, gpt_block, gpt_layers, gpt_parameters
from scratchpar.train.strategies.family import Layout

GPTS = [(7, 5, 16, 4, 2, 24, 2), (32, 16, 24, 6, 3, 40, 3), (50, 8, 16, 4, 1, 100, 1)]
# V, T, C, H, G, F, layers


@pytest.mark.parametrize("vocab, seq_len, c, heads, groups, wide, layers", GPTS)
@pytest.mark.parametrize("tied", [False, True])
def test_a_grouped_gpts_parameters_are_the_built_models(vocab, seq_len, c, heads, groups, wide,
                                                        layers, tied):
    model = nn.GPT(vocab, seq_len, c, heads, layers, np.random.default_rng(0),
                   tie_embeddings=tied, kv_heads=groups, d_ff=wide)
    kv = groups * (c // heads)
    assert gpt_parameters(vocab, seq_len, c, layers, tied, kv=kv, wide=wide) == \
        sum(p.size for p in model.parameters())
    assert gpt_layers(vocab, seq_len, c, layers, kv=kv, wide=wide) == \
        parameter_counts(model.pipeline_layers())
    assert gpt_arrays(vocab, seq_len, c, layers, tied, kv=kv, wide=wide) == \
        tuple(p.size for p in model.parameters())


@pytest.mark.parametrize("c, heads, groups, wide", [(24, 6, 3, 40), (16, 4, 1, 24),
                                                    (16, 4, 2, 64)])
@pytest.mark.parametrize("tp", [1, 2, 3, 4])
def test_a_grouped_blocks_parameters_on_each_tensor_parallel_rank_are_its_shards(
        c, heads, groups, wide, tp):
    """A rank takes whole key/value groups with their query heads, none where tp > G."""
    block = nn.Block(c, heads, np.random.default_rng(0), kv_heads=groups, d_ff=wide)
    for r in range(tp):
        sizes = Sizes.rank(2, 8, c, heads, tp, r, groups=groups, wide=wide)
        shard = ParallelBlock(block, SimpleNamespace(rank=r, size=tp))
        assert gpt_block(sizes.c, sizes.q, sizes.hidden, sizes.kv) == \
            sum(p.size for p in shard.parameters())


@pytest.mark.parametrize("sequence_parallel", [False, True])
def test_the_ranks_sizes_split_a_grouped_blocks_arrays(sequence_parallel):
    b, t, c, heads, groups, wide, tp = 3, 12, 24, 6, 3, 42, 2
    ranks = [Sizes.rank(b, t, c, heads, tp, r, sequence_parallel, groups, wide)
             for r in range(tp)]
    assert sum(s.q for s in ranks) == c and sum(s.kv for s in ranks) == groups * c // heads
    assert sum(s.hidden for s in ranks) == wide
    assert sum(s.scores for s in ranks) == b * heads * t * t
    assert [s.q / s.kv for s in ranks] == [heads / groups] * tp  # whole groups, r heads each
    even = Sizes.even(b, t, c, heads, 3, sequence_parallel, groups, wide)
    assert Sizes.rank(b, t, c, heads, 3, 1, sequence_parallel, groups, wide) == even


def kept(c, heads, groups, wide, mode, dtype):
    """Bytes an ``nn.Block``'s graph keeps for backward with dropout on 2 rows of 8 tokens
    under ``mode``, beside what ``gpt_layer`` counts of it (and the causal mask it caches)."""
    block = nn.Block(c, heads, np.random.default_rng(0), dropout=0.1, dtype=dtype,
                     kv_heads=groups, d_ff=wide)
    nn.set_dropout_generator(block, DeviceRandom(0, 0))
    recompute([block] if mode == "full" else chosen(block, mode))
    x = Tensor(np.random.default_rng(1).standard_normal((2, 8, c)).astype(dtype),
               requires_grad=True)
    out = block(x)
    got = graph_bytes(out, [*block.parameters(), x]) - out.data.nbytes
    got += x.data.nbytes if mode == "full" else 0  # the input, where it is kept
    s = np.dtype(dtype).itemsize
    want = gpt_layer(Sizes.even(2, 8, c, heads, groups=groups, wide=wide), s, s, True, mode)
    return got, want + causal_mask(8) * (mode == "none")


@pytest.mark.parametrize("mode", ["none", "selective", "full"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_grouped_block_keeps_what_gpt_layer_counts(mode, dtype):
    """As near as a multi-head block of the same width: its few scalars beside the count."""
    got, want = kept(16, 4, 4, 64, mode, dtype)
    for groups, wide in [(2, 64), (1, 64), (2, 24), (1, 100)]:
        grouped, counted = kept(16, 4, groups, wide, mode, dtype)
        assert grouped - counted == got - want


def test_grouped_attention_keeps_k_and_v_at_g_over_h_and_the_mlp_scales_with_f():
    """Per block and token, G key/value heads of d keep 2(H − G)·d values fewer than H heads
    (the attention core's and full recomputation's bytes unchanged), and F hidden units 3F
    (W₁'s output, GELU's σ and its output): of Korthikanti et al. 2022's 12 split arrays of h,
    2 + 2G/H + 2F/h. So does the estimate's step, 3 blocks on 8 rows in float32."""
    b, t, c, heads = 2, 16, 32, 8
    n, d = b * t, c // heads

    def layer(groups, wide, mode="none"):
        return gpt_layer(Sizes.even(b, t, c, heads, groups=groups, wide=wide), 2, 4, False, mode)

    for groups in (1, 2, 4):
        assert layer(heads, 4 * c) - layer(groups, 4 * c) == 2 * 2 * n * (heads - groups) * d
        assert layer(heads, 4 * c, "selective") - layer(groups, 4 * c, "selective") == \
            2 * 2 * n * (heads - groups) * d
        assert layer(groups, 4 * c, "full") == layer(heads, 4 * c, "full")
    assert layer(2, 6 * c) - layer(2, 4 * c) == 2 * n * 3 * (6 * c - 4 * c)

    def step(**model):  # the estimate's step on 8 rows, the logits its widest moment
        cfg = make_config({"model": {"kind": "gpt", "d_model": c, "n_heads": heads,
                                     "n_layers": 3, **model},
                           "data": {"seq_len": t, "vocab_size": 1024, "order": 1}})
        return network(cfg, 4, 1024, Layout(8), 1).step

    layers, s, tokens = 3, 4, 8 * t
    assert step() - step(kv_heads=2) == layers * s * tokens * 2 * (heads - 2) * d
    assert step(d_ff=6 * c) - step() == layers * s * tokens * 3 * (6 * c - 4 * c)


@pytest.mark.parametrize("sp, want", [(False, (4 + (2 + 1 + 4.5 + 4) / 2) / 15.5),
                                      (True, (2 + (2 + 2 + 1 + 4.5 + 4) / 2) / 15.5)])
def test_a_tensor_parallel_rank_keeps_its_share_of_a_grouped_block(sp, want):
    """In (N, C) arrays, C = 64 and H·T/C = 4: the LayerNorms' 4, Q and attention·V 2, K and V
    2G/H = 1, the MLP's 3F/C = 4.5 and the scores 4, split over t = 2 but the LayerNorms'."""
    cfg = make_config({"model": {"kind": "gpt", "d_model": 64, "n_heads": 4, "kv_heads": 2,
                                 "d_ff": 96},
                       "data": {"seq_len": 64},
                       "train": {"strategy": "hybrid", "tp": 2, "sequence_parallel": sp}},
                      world_size=2)
    assert tensor_share(cfg, 2) == pytest.approx(want)


@pytest.mark.parametrize("groups, wide, mode, experts", [
    (1, 20, "none", 0), (2, 100, "selective", 0), (2, 48, "full", 0), (1, 40, "none", 3)])
def test_the_estimate_bounds_what_a_grouped_gpts_step_allocates(groups, wide, mode, experts):
    """As ``test_train_memory`` bounds a multi-head GPT's: a measured peak (tracemalloc) below
    the estimate, and not far below; dense, or F wide experts."""
    cfg = config("gpt", {"dtype": "float32", "precision": "fp32", "optimizer": "adam",
                         "weight_decay": 0.0, "momentum": 0.0, "batch_size": 8,
                         "eval_batches": 1, "seq_len": 24, "vocab_size": 16, "order": 1,
                         "heads": 4, "head_dim": 8, "n_layers": 2,
                         "dropout": 0.0 if experts else 0.1, "recompute": mode})
    model = dataclasses.replace(cfg.model, kv_heads=groups, d_ff=wide, experts=experts)
    check_bounds(dataclasses.replace(cfg, model=model))
