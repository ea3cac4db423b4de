"""The GPT's counts in ``train/memory_models.py`` against the built models: its parameters, each
pipeline layer's, a block's on each tensor-parallel rank, and the causal mask's bytes."""

from types import SimpleNamespace

import numpy as np
import pytest

from scratchpar.nn import GPT, Block
from scratchpar.nn.mlp import MLP
from scratchpar.parallel.pipeline.partition import parameter_counts
from scratchpar.parallel.tensor.block import ParallelBlock
from scratchpar.train.cli import load_config
from scratchpar.train.memory import network, source_of
from scratchpar.train.memory_context import causal_mask
from scratchpar.train.memory_models import Sizes
from scratchpar.train.memory_parameters import gpt_arrays, gpt_block, gpt_layers, gpt_parameters
from scratchpar.train.strategies.family import Layout

GPTS = [(7, 5, 4, 2, 2), (32, 16, 24, 6, 3), (50, 8, 16, 4, 1)]  # V, T, C, heads, layers


@pytest.mark.parametrize("vocab, seq_len, d_model, heads, layers", GPTS)
@pytest.mark.parametrize("tied", [False, True])
def test_the_gpts_parameters_are_the_built_models(vocab, seq_len, d_model, heads, layers, tied):
    model = GPT(vocab, seq_len, d_model, heads, layers, np.random.default_rng(0),
                tie_embeddings=tied)
    assert gpt_parameters(vocab, seq_len, d_model, layers, tied) == \
        sum(p.size for p in model.parameters())
    assert gpt_layers(vocab, seq_len, d_model, layers) == \
        parameter_counts(model.pipeline_layers())  # a tied table in both layers that hold it
    assert gpt_arrays(vocab, seq_len, d_model, layers, tied) == \
        tuple(p.size for p in model.parameters())


@pytest.mark.parametrize("d_model, heads", [(24, 6), (16, 4)])
@pytest.mark.parametrize("tp", [1, 2, 3, 4, 5])
def test_a_blocks_parameters_on_each_tensor_parallel_rank_are_its_shards(d_model, heads, tp):
    """Uneven splits too: at t = 5 of 4 heads a rank holds none, yet its replicated 6C."""
    block = Block(d_model, heads, np.random.default_rng(0))
    assert gpt_block(d_model, d_model, 4 * d_model) == sum(p.size for p in block.parameters())
    for r in range(tp):
        sizes = Sizes.rank(2, 8, d_model, heads, tp, r)
        shard = ParallelBlock(block, SimpleNamespace(rank=r, size=tp))
        assert gpt_block(sizes.c, sizes.q, sizes.hidden) == \
            sum(p.size for p in shard.parameters())


@pytest.mark.parametrize("sequence_parallel", [False, True])
def test_the_ranks_sizes_split_a_blocks_arrays_and_even_ones_are_the_even_share(
        sequence_parallel):
    b, t, c, heads, tp = 3, 10, 16, 4, 3
    ranks = [Sizes.rank(b, t, c, heads, tp, r, sequence_parallel) for r in range(tp)]
    assert all(s.n == b * t and s.c == c for s in ranks)
    assert sum(s.q for s in ranks) == c and sum(s.hidden for s in ranks) == 4 * c
    assert sum(s.scores for s in ranks) == b * heads * t * t
    assert sum(s.shard for s in ranks) == (b * t if sequence_parallel else tp * b * t)
    assert Sizes.rank(b, 12, c, heads, 2, 1, sequence_parallel) == \
        Sizes.even(b, 12, c, heads, 2, sequence_parallel)


def test_the_causal_mask_is_the_bytes_an_attention_caches():
    core = Block(8, 2, np.random.default_rng(0)).attn.core
    assert causal_mask(12) == core.causal_mask(12, np).nbytes


def test_the_estimates_shapes_list_the_built_models_arrays():
    """In definition order, as the engine's buckets pack them (reversed for data parallelism);
    a GPT's with one key/value head per query head or fewer (grouped-query attention), its
    feed-forward 4C wide or not."""
    cfg = load_config(["--source", "classification", "--strategy", "single"])
    d = cfg.data
    mlp = MLP([d.n_features, *cfg.model.hidden_sizes, d.n_classes], np.random.default_rng(0))
    assert network(cfg, 4, None, Layout(1), 1).shape.sizes == \
        tuple(p.size for p in mlp.parameters())
    for flags in (["--tie-embeddings"], ["--kv-heads", "2", "--d-ff", "96"]):
        cfg = load_config(["--model", "gpt", *flags, "--strategy", "single"])
        m, vocab = cfg.model, source_of(cfg).vocab
        gpt = GPT(vocab, cfg.data.seq_len, m.d_model, m.n_heads, m.n_layers,
                  np.random.default_rng(0), tie_embeddings=m.tie_embeddings, kv_heads=m.groups,
                  d_ff=m.wide)
        shape = network(cfg, 4, vocab, Layout(1), 1).shape
        assert shape.sizes == tuple(p.size for p in gpt.parameters())
        assert (shape.psi, shape.largest) == (sum(shape.sizes), max(shape.sizes))
