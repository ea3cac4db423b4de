"""Sampling with a cache gives the logits the whole forward gives, token by token, for every
language model; the draw obeys its temperature, top-k and seed."""

import numpy as np
import pytest
from device_helpers import host

from scratchpar import nn
from scratchpar.autograd import no_grad
from scratchpar.nn.generate import decoder_for, generate, pick

V, T = 11, 8


def models():
    return {"gpt": nn.GPT(V, T, 16, 2, 2, np.random.default_rng(1), dtype=np.float64),
            "gpt-tied": nn.GPT(V, T, 8, 2, 1, np.random.default_rng(2), dtype=np.float64,
                               tie_embeddings=True),
            "gpt-grouped": nn.GPT(V, T, 16, 4, 2, np.random.default_rng(5), dtype=np.float64,
                                  kv_heads=2, d_ff=24),
            "lstm": nn.LSTMLanguageModel(V, 12, 10, np.random.default_rng(3), np.float64,
                                         n_layers=2),
            "rnn": nn.RNNLanguageModel(V, 12, 10, np.random.default_rng(4), np.float64)}


def full_logits(model, ids) -> np.ndarray:
    """(T, V): the model's own forward over ``ids``."""
    model.eval()
    with no_grad():
        return host(model(np.array([ids])).data[0])


@pytest.mark.parametrize("kind", ["gpt", "gpt-tied", "gpt-grouped", "lstm", "rnn"])
@pytest.mark.parametrize("prompt", [1, 3, T])
def test_the_cache_gives_the_whole_forwards_logits_at_every_position(kind, prompt):
    model = models()[kind]
    ids = np.random.default_rng(prompt).integers(0, V, T).tolist()
    want = full_logits(model, ids)  # (T, V)
    decoder = decoder_for(model)
    got = [decoder.prime(ids[:prompt])] + [decoder.advance(t) for t in ids[prompt:]]
    np.testing.assert_allclose(np.array([host(g) for g in got]), want[prompt - 1:], rtol=1e-10,
                               atol=1e-12)


def test_a_full_gpt_window_slides_to_its_last_half():
    model = models()["gpt"]
    ids = np.random.default_rng(0).integers(0, V, T + 3).tolist()
    decoder = decoder_for(model)
    decoder.prime(ids[:T])
    for k in range(T, T + 3):  # each new token past the window
        got = decoder.advance(ids[k])
        kept = T // 2 + (k - T)  # the last half at the slide, then one more per token
        context = ids[k + 1 - kept:k + 1]
        np.testing.assert_allclose(host(got), full_logits(model, context)[-1], rtol=1e-10,
                                   atol=1e-12)
        assert len(decoder.tokens) == len(context) <= T


def test_temperature_zero_and_top_one_are_the_largest_logit():
    logits = np.array([0.1, 2.0, -1.0, 1.9])
    gen = np.random.default_rng(0)
    assert pick(logits, 0.0, None, gen) == 1
    assert {pick(logits, 1.0, 1, gen) for _ in range(50)} == {1}


def test_top_k_draws_only_the_k_largest_and_the_seed_repeats_the_draw():
    logits = np.array([0.0, 3.0, 1.0, 2.9, -2.0])
    draws = [pick(logits, 5.0, 2, np.random.default_rng(s)) for s in range(200)]
    assert set(draws) == {1, 3}
    again = [pick(logits, 5.0, 2, np.random.default_rng(s)) for s in range(200)]
    assert draws == again


def test_a_high_temperature_flattens_the_draw():
    logits = np.log(np.array([0.7, 0.2, 0.1]))
    gen = np.random.default_rng(0)
    cold = np.bincount([pick(logits, 0.5, None, gen) for _ in range(4000)], minlength=3)
    hot = np.bincount([pick(logits, 4.0, None, gen) for _ in range(4000)], minlength=3)
    assert cold[0] > 3000 and hot[0] < 2000 and hot[2] > 800


@pytest.mark.parametrize("kind", ["gpt", "lstm"])
def test_generation_is_seeded_and_never_draws_a_forbidden_id(kind):
    model = models()[kind]
    first = list(generate(model, [3, 4], 3 * T, temperature=2.0, seed=7, forbidden=(0, 5)))
    assert len(first) == 3 * T and not {0, 5} & set(first)
    assert first == list(generate(model, [3, 4], 3 * T, temperature=2.0, seed=7,
                                  forbidden=(0, 5)))
    assert first != list(generate(model, [3, 4], 3 * T, temperature=2.0, seed=8,
                                  forbidden=(0, 5)))


def test_a_restart_token_begins_anew_from_the_start():
    """Greedy draws: after the end token, the tokens are the start's own greedy ones again."""
    model, start, n = models()["lstm"], [3], 3 * T
    end = next(generate(model, [3, 4], 1, temperature=0))  # the first greedy token: the end
    again = list(generate(model, start, n, temperature=0))
    if end in again:  # each sentence runs to its end, then the start again
        again = (again[:again.index(end) + 1] * n)[:n]
    tokens = list(generate(model, [3, 4], n + 1, temperature=0, restart=(end, start)))
    assert tokens[0] == end and tokens[1:] == again
