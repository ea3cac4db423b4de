"""The GPT's counts in ``train/memory_models.py`` against the built models: its parameters, each
pipeline layer's, and the causal mask's bytes."""

import numpy as np
import pytest

from scratchpar.nn import GPT, Block
from scratchpar.parallel.pipeline.partition import parameter_counts
from scratchpar.train.memory_models import causal_mask, gpt_layers, gpt_parameters

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


def test_the_causal_mask_is_the_bytes_an_attention_caches():
    core = Block(8, 2, np.random.default_rng(0)).attn.core
    assert causal_mask(12) == core.causal_mask(12, np).nbytes
