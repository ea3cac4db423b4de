"""SyntheticLanguage.bayes_risk: exact against enumeration, hand cases, and Monte Carlo."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchpar.data import SyntheticLanguage

PAD, BOS, EOS = SyntheticLanguage.PAD, SyntheticLanguage.BOS, SyntheticLanguage.EOS


def enumerated_floor(lang):
    """E[Σ -log p(target)] / E[#targets] by walking every sentence the source can emit."""
    loss, count = 0.0, 0.0
    frontier = [((BOS,) * lang.order, 1.0)]  # (last `order` tokens, probability), rows alive
    for _ in range(lang.seq_len):
        grown = []
        for context, prob in frontier:
            count += prob
            for token, p in enumerate(lang.table[context]):
                if p == 0.0:
                    continue
                loss -= prob * p * math.log(p)
                if token != EOS:
                    grown.append(((*context[1:], token), prob * p))
        frontier = grown
    return loss / count


def binary_entropy(p):
    return -p * math.log(p) - (1 - p) * math.log(1 - p)


def row_entropy(p):
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


@settings(max_examples=25, deadline=None)
@given(
    vocab_size=st.integers(4, 6),
    order=st.integers(1, 3),
    seq_len=st.integers(1, 5),
    concentration=st.sampled_from([0.05, 0.5, 5.0]),
    mean_length=st.floats(0.2, 30.0),
    seed=st.integers(0, 1000),
)
def test_floor_equals_enumeration_over_all_sentences(
    vocab_size, order, seq_len, concentration, mean_length, seed
):
    lang = SyntheticLanguage(vocab_size, order, seq_len, concentration, mean_length, seed)
    assert lang.bayes_risk() == pytest.approx(enumerated_floor(lang), rel=1e-12)


@pytest.mark.parametrize(
    ("order", "seq_len", "mean_length"), [(1, 1, 3.0), (2, 7, 0.5), (3, 50, 9.0)]
)
def test_one_word_vocabulary_gives_the_binary_entropy(order, seq_len, mean_length):
    """With a single word every context is the same coin: word or EOS."""
    lang = SyntheticLanguage(4, order, seq_len, mean_length=mean_length, seed=7)
    assert lang.bayes_risk() == pytest.approx(binary_entropy(1 / (mean_length + 1)), rel=1e-12)


def test_huge_concentration_gives_the_uniform_entropy():
    """Near-uniform words: H = h(p) + (1-p) log(#words) in every context."""
    lang = SyntheticLanguage(vocab_size=20, order=2, concentration=1e9, mean_length=5.0, seed=0)
    p = 1 / 6
    expected = binary_entropy(p) + (1 - p) * math.log(17)
    assert lang.bayes_risk() == pytest.approx(expected, abs=1e-6)


def test_seq_len_one_is_the_entropy_of_the_first_token():
    lang = SyntheticLanguage(vocab_size=10, order=2, seq_len=1, seed=3)
    assert lang.bayes_risk() == pytest.approx(row_entropy(lang.table[BOS, BOS]), rel=1e-12)


def test_seq_len_two_by_hand():
    """(H(BOS) + Σ_w P(w|BOS) H(w)) / (1 + P(not EOS)) for a bigram source."""
    lang = SyntheticLanguage(vocab_size=7, order=1, seq_len=2, mean_length=2.0, seed=4)
    first = lang.table[BOS]
    second = sum(first[w] * row_entropy(lang.table[w]) for w in range(3, 7))
    expected = (row_entropy(first) + second) / (1 + (1 - 1 / 3))
    assert lang.bayes_risk() == pytest.approx(expected, rel=1e-12)


def test_floor_is_below_the_unigram_bound_and_positive():
    lang = SyntheticLanguage()
    assert 0.0 < lang.bayes_risk() < binary_entropy(1 / 21) + (20 / 21) * math.log(29)


def monte_carlo_floor(lang, n_batches, batch_size):
    """Mean of -log p_true over non-pad targets, with its delta-method standard error."""
    sums, counts = [], []
    for step in range(n_batches):
        batch = lang.batch(step, batch_size)  # (B, T+1)
        prefix = np.full((batch_size, lang.order - 1), BOS, dtype=np.int64)
        ext = np.concatenate([prefix, batch], axis=1)  # (B, order-1+T+1)
        index = tuple(ext[:, j : j + lang.seq_len] for j in range(lang.order)) + (batch[:, 1:],)
        alive = batch[:, 1:] != PAD  # (B, T)
        nll = -np.log(np.where(alive, lang.table[index], 1.0))  # (B, T)
        sums.append(nll.sum(axis=1))
        counts.append(alive.sum(axis=1))
    s, n = np.concatenate(sums), np.concatenate(counts)  # (N,), (N,)
    estimate = s.sum() / n.sum()
    se = np.sqrt(np.var(s - estimate * n, ddof=1) / len(s)) / n.mean()
    return estimate, se


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"vocab_size": 12, "order": 1, "seq_len": 16, "mean_length": 50.0, "concentration": 0.3},
        {"vocab_size": 8, "order": 3, "seq_len": 30, "mean_length": 4.0, "concentration": 1.0},
    ],
)
def test_floor_matches_monte_carlo(kwargs):
    lang = SyntheticLanguage(seed=11, **kwargs)
    estimate, se = monte_carlo_floor(lang, n_batches=100, batch_size=128)
    assert se < 0.01
    assert abs(estimate - lang.bayes_risk()) < 4 * se
