"""SyntheticLanguage: batch structure, determinism in (seed, step), sampling law, bad arguments."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchpar.data import DataError, SyntheticLanguage
from scratchpar.data.synthetic import MAX_TABLE_ENTRIES

PAD, BOS, EOS = SyntheticLanguage.PAD, SyntheticLanguage.BOS, SyntheticLanguage.EOS


@st.composite
def languages(draw):
    order = draw(st.integers(1, 3))
    vocab_size = draw(st.integers(4, {1: 40, 2: 24, 3: 10}[order]))
    return SyntheticLanguage(
        vocab_size=vocab_size,
        order=order,
        seq_len=draw(st.integers(1, 40)),
        concentration=draw(st.sampled_from([0.01, 0.1, 1.0, 10.0])),
        mean_length=draw(st.floats(0.5, 60.0)),
        seed=draw(st.integers(0, 2**32)),
    )


def contexts(lang, batch):
    """The context tokens of every target: (B, T, order), BOS before the sentence start."""
    prefix = np.full((batch.shape[0], lang.order - 1), BOS, dtype=np.int64)  # (B, order-1)
    ext = np.concatenate([prefix, batch], axis=1)  # (B, order-1+T+1)
    return np.stack([ext[:, j : j + lang.seq_len] for j in range(lang.order)], axis=-1)


def true_log_prob(lang, batch):
    """log P(target | context) of every target under the source's table: (B, T)."""
    ctx = contexts(lang, batch)  # (B, T, order)
    index = tuple(ctx[..., j] for j in range(lang.order)) + (batch[:, 1:],)
    with np.errstate(divide="ignore"):
        return np.log(lang.table[index])


def check_sentences(lang, batch):
    """Every row is BOS w1 … wk EOS PAD … PAD, or BOS w1 … w_T when truncated."""
    V, T = lang.vocab_size, lang.seq_len
    assert batch.dtype == np.int32
    assert batch.shape[1] == T + 1
    assert np.all(batch[:, 0] == BOS)
    assert np.all(batch[:, 1:] != BOS)
    assert np.all((batch >= 0) & (batch < V))
    ended = np.cumsum(batch == EOS, axis=1)  # (B, T+1) EOS seen up to and including t
    assert np.all(ended <= 1), "at most one EOS per row"
    after_eos = np.concatenate([np.zeros((len(batch), 1), int), ended[:, :-1]], axis=1) > 0
    assert np.all((batch == PAD) == after_eos), "PAD exactly at the positions after EOS"


@settings(max_examples=40, deadline=None)
@given(lang=languages(), step=st.integers(0, 2**40), batch_size=st.integers(1, 16))
def test_batches_are_padded_sentences(lang, step, batch_size):
    batch = lang.batch(step, batch_size)
    assert batch.shape == (batch_size, lang.seq_len + 1)
    check_sentences(lang, batch)
    alive = batch[:, 1:] != PAD  # (B, T) targets that count
    assert np.all(np.isfinite(true_log_prob(lang, batch)[alive])), "a zero-probability token"


@settings(max_examples=20, deadline=None)
@given(lang=languages(), step=st.integers(0, 2**40))
def test_same_seed_and_step_give_the_same_batch(lang, step):
    twin = SyntheticLanguage(
        lang.vocab_size, lang.order, lang.seq_len, lang.concentration, lang.mean_length, lang.seed
    )
    np.testing.assert_array_equal(twin.table, lang.table)
    np.testing.assert_array_equal(twin.batch(step, 8), lang.batch(step, 8))
    lang.batch(step + 1, 8)
    np.testing.assert_array_equal(twin.batch(step, 8), lang.batch(step, 8))


def test_steps_and_seeds_give_different_data():
    lang = SyntheticLanguage(seed=3)
    batches = [lang.batch(step, 64).tobytes() for step in range(20)]
    assert len(set(batches)) == 20
    other = SyntheticLanguage(seed=4)
    assert not np.array_equal(other.table, lang.table)
    assert not np.array_equal(other.batch(0, 64), lang.batch(0, 64))


@pytest.mark.parametrize("order", [1, 2, 3])
def test_table_is_a_distribution_over_words_and_eos(order):
    lang = SyntheticLanguage(vocab_size=9, order=order, mean_length=4.0, seed=1)
    assert lang.table.shape == (9,) * (order + 1)
    assert lang.table.dtype == np.float64
    np.testing.assert_allclose(lang.table.sum(axis=-1), 1.0, rtol=1e-12)
    assert np.all(lang.table[..., [PAD, BOS]] == 0.0)
    np.testing.assert_allclose(lang.table[..., EOS], 1 / 5)


def test_small_concentration_gives_peaked_rows():
    peaked = SyntheticLanguage(vocab_size=32, order=1, concentration=0.05, seed=0)
    flat = SyntheticLanguage(vocab_size=32, order=1, concentration=50.0, seed=0)
    assert peaked.table[..., 3:].max(axis=-1).mean() > 3 * flat.table[..., 3:].max(axis=-1).mean()


def test_tokens_follow_the_table():
    """First words and second words (given the first) match the table within 5 sigma."""
    lang = SyntheticLanguage(vocab_size=8, order=2, seq_len=4, concentration=0.5, seed=2)
    rows = np.concatenate([lang.batch(step, 1000) for step in range(20)])  # (N, 5)
    n = len(rows)
    for first in range(EOS, 8):
        p = lang.table[BOS, BOS, first]
        freq = np.mean(rows[:, 1] == first)
        assert abs(freq - p) < 5 * np.sqrt(p * (1 - p) / n) + 1e-12
    word = 3 + int(np.argmax(lang.table[BOS, BOS, 3:]))
    given_word = rows[rows[:, 1] == word, 2]
    for second in range(EOS, 8):
        p = lang.table[BOS, word, second]
        freq = np.mean(given_word == second)
        assert abs(freq - p) < 5 * np.sqrt(p * (1 - p) / len(given_word)) + 1e-12


def test_sentence_length_has_the_requested_mean():
    lang = SyntheticLanguage(vocab_size=12, order=1, seq_len=400, mean_length=10.0, seed=5)
    rows = np.concatenate([lang.batch(step, 500) for step in range(8)])
    words = np.sum(rows >= 3, axis=1)  # (N,) geometric with mean 10, variance 110
    assert np.all(np.any(rows == EOS, axis=1)), "no sentence of 400 words at this mean"
    assert abs(words.mean() - 10.0) < 5 * np.sqrt(110 / len(words))


def test_long_sentences_are_truncated():
    lang = SyntheticLanguage(vocab_size=6, order=1, seq_len=5, mean_length=1000.0, seed=0)
    batch = lang.batch(0, 200)
    truncated = ~np.any(batch == EOS, axis=1)
    assert truncated.mean() > 0.9
    assert np.all(batch[truncated, 1:] >= 3)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"vocab_size": 3}, "vocab_size"),
        ({"vocab_size": 4.0}, "vocab_size"),
        ({"vocab_size": True}, "vocab_size"),
        ({"order": 0}, "order"),
        ({"vocab_size": 2**11 + 1, "order": 1}, "table entries"),
        ({"vocab_size": 4, "order": 10**6}, "table entries"),
        ({"seq_len": 0}, "seq_len"),
        ({"concentration": 0.0}, "concentration"),
        ({"concentration": float("inf")}, "concentration"),
        ({"mean_length": -1.0}, "mean_length"),
        ({"mean_length": float("nan")}, "mean_length"),
        ({"seed": -1}, "seed"),
    ],
)
def test_bad_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SyntheticLanguage(**kwargs)


def test_largest_allowed_table_is_accepted():
    assert 2**11 * 2**11 == MAX_TABLE_ENTRIES
    SyntheticLanguage(vocab_size=2**11, order=1, seq_len=2)


@pytest.mark.parametrize(
    ("step", "batch_size", "match"),
    [(-1, 4, "step"), (1.5, 4, "step"), (0, 0, "batch_size"), (0, 2.0, "batch_size")],
)
def test_bad_batch_requests_raise(step, batch_size, match):
    with pytest.raises(ValueError, match=match):
        SyntheticLanguage().batch(step, batch_size)


def test_words_decode_and_encode_back_after_the_sentence_start():
    lang = SyntheticLanguage(vocab_size=12, order=1, seq_len=30, seed=2)
    batch = lang.batch(0, 4)
    for row in batch:
        text = lang.decode(row)
        assert "w0" not in text and "w1 " not in text  # PAD and BOS are not shown
        words = [i for i in row.tolist() if i > lang.BOS]
        assert lang.encode(text).tolist() == [lang.BOS] + words
    with pytest.raises(DataError, match="'w12' is not a word of this language"):
        lang.encode("w3 w12")
