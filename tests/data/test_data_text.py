"""CharText: vocabulary, windows from the file, the held-out part, determinism, encode/decode,
unreadable files."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchpar.data import CharText, DataError

TEXT = "the quick brown fox — jumps over the lazy dög. 日本語!\n" * 7


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


def test_vocabulary_is_the_sorted_characters_after_pad(corpus):
    data = CharText(corpus, seq_len=8)
    assert data.chars == "".join(sorted(set(TEXT)))
    assert data.vocab_size == len(set(TEXT)) + 1
    assert data.bayes_risk() is None
    ids = data.encode("abc")
    assert ids.dtype == np.int32
    np.testing.assert_array_equal(ids, [data.chars.index(c) + 1 for c in "abc"])
    assert data.encode(TEXT).min() == 1
    assert data.encode(TEXT).max() == data.vocab_size - 1


@settings(max_examples=30, deadline=None)
@given(text=st.text(alphabet=sorted(set(TEXT)), max_size=50))
def test_decode_inverts_encode(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("c") / "c.txt"
    path.write_text(TEXT, encoding="utf-8")
    data = CharText(str(path), seq_len=4)
    assert data.decode(data.encode(text)) == text
    assert data.decode(np.concatenate([data.encode(text), [0, 0]])) == text


@settings(max_examples=20, deadline=None)
@given(seq_len=st.integers(1, 60), step=st.integers(0, 2**40), batch_size=st.integers(1, 9))
def test_batches_are_windows_of_the_file(tmp_path_factory, seq_len, step, batch_size):
    path = tmp_path_factory.mktemp("c") / "c.txt"
    path.write_text(TEXT, encoding="utf-8")
    data = CharText(path, seq_len=seq_len, seed=5, eval_fraction=0.5)
    again = CharText(path, seq_len=seq_len, seed=5, eval_fraction=0.5)
    for batch, same in ((data.batch(step, batch_size), again.batch(step, batch_size)),
                        (data.held_out(step, batch_size), again.held_out(step, batch_size))):
        assert batch.dtype == np.int32
        assert batch.shape == (batch_size, seq_len + 1)
        assert np.all(batch != CharText.PAD)
        for row in batch:
            assert data.decode(row) in TEXT
        np.testing.assert_array_equal(same, batch)


def test_steps_and_seeds_give_different_windows(corpus):
    data = CharText(corpus, seq_len=16, seed=0)
    assert len({data.batch(step, 8).tobytes() for step in range(10)}) == 10
    assert not np.array_equal(CharText(corpus, seq_len=16, seed=1).batch(0, 8), data.batch(0, 8))


def test_every_offset_of_each_part_is_reachable(tmp_path):
    path = tmp_path / "short.txt"
    path.write_text("abcdefghijkl", encoding="utf-8")
    data = CharText(path, seq_len=4, eval_fraction=0.5)  # "abcdef" trains, "ghijkl" is held out
    rows = {data.decode(row) for step in range(5) for row in data.batch(step, 10)}
    assert rows == {"abcde", "bcdef"}
    held = {data.decode(row) for i in range(5) for row in data.held_out(i, 10)}
    assert held == {"ghijk", "hijkl"}


@settings(max_examples=40, deadline=None)
@given(n=st.integers(20, 400), seq_len=st.integers(1, 9),
       fraction=st.floats(0.05, 0.95), step=st.integers(0, 2**40), batch_size=st.integers(1, 9))
def test_held_out_windows_never_overlap_training_windows(tmp_path_factory, n, seq_len, fraction,
                                                         step, batch_size):
    """Character k of the file is chr(0x4E00 + k), so a window says where it was cut from."""
    path = tmp_path_factory.mktemp("c") / "c.txt"
    path.write_text("".join(chr(0x4E00 + k) for k in range(n)), encoding="utf-8")
    held = round(fraction * n)
    if min(held, n - held) < seq_len + 1:
        with pytest.raises(DataError, match="must fit in each part"):
            CharText(path, seq_len=seq_len, eval_fraction=fraction)
        return
    data = CharText(path, seq_len=seq_len, eval_fraction=fraction)

    def positions(batch):  # (B, T+1) → the file positions of its characters
        return np.array([[ord(c) - 0x4E00 for c in data.decode(row)] for row in batch])

    trained = positions(data.batch(step, batch_size))
    scored = positions(data.held_out(step, batch_size))
    assert trained.max() < n - held <= scored.min()  # the last `held` characters are held out
    for windows in (trained, scored):  # each a contiguous window of the file
        np.testing.assert_array_equal(np.diff(windows, axis=1), 1)


def test_a_text_held_out_whole_has_no_training_batches(corpus):
    data = CharText(corpus, seq_len=8, eval_fraction=1)
    assert data.decode(data.held_out(0, 3)[0]) in TEXT
    with pytest.raises(DataError, match="held out whole"):
        data.batch(0, 3)
    for fraction in (0, -0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="eval_fraction"):
            CharText(corpus, seq_len=8, eval_fraction=fraction)


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        CharText(tmp_path / "absent.txt")


def test_directory_is_not_a_file(tmp_path):
    with pytest.raises(DataError, match="cannot read"):
        CharText(tmp_path)


def test_non_utf8_file(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("caf\xe9 ".encode("latin-1") * 40)
    with pytest.raises(DataError, match="not UTF-8"):
        CharText(path, seq_len=8)


def test_too_short_file(tmp_path):
    path = tmp_path / "short.txt"
    path.write_text("x" * 90, encoding="utf-8")  # 81 to train on, 9 held out
    with pytest.raises(DataError, match="90 characters, of which the last 0.1 is held out: 9 "
                                        "held out, but a window of seq_len"):
        CharText(path, seq_len=9)
    assert CharText(path, seq_len=8).held_out(0, 3).shape == (3, 9)
    with pytest.raises(DataError, match="9 to train on, but"):
        CharText(path, seq_len=9, eval_fraction=0.9)


def test_data_error_is_a_value_error():
    assert issubclass(DataError, ValueError)


def test_bad_encode_decode_and_arguments(corpus):
    data = CharText(corpus, seq_len=8)
    with pytest.raises(DataError, match="'Z'"):
        data.encode("Zebra")
    with pytest.raises(DataError, match="outside"):
        data.decode([1, data.vocab_size])
    with pytest.raises(DataError, match="outside"):
        data.decode([-1])
    with pytest.raises(DataError, match="integers"):
        data.decode([1.0])
    with pytest.raises(ValueError, match="seq_len"):
        CharText(corpus, seq_len=0)
    with pytest.raises(ValueError, match="step"):
        data.batch(-1, 2)
    with pytest.raises(ValueError, match="batch_size"):
        data.batch(0, 0)


def test_another_text_reads_with_a_given_vocabulary_and_refuses_what_it_lacks(corpus, tmp_path):
    trained = CharText(corpus, seq_len=8)
    other = tmp_path / "other.txt"
    other.write_text("the lazy fox. the brown dog.\n" * 3, encoding="utf-8")
    read = CharText(other, seq_len=8, chars=trained.chars)
    assert read.vocab_size == trained.vocab_size
    assert trained.decode(read.data) == other.read_text(encoding="utf-8")
    other.write_text("THE LAZY FOX. " * 3, encoding="utf-8")
    with pytest.raises(DataError, match="characters outside the model's vocabulary of"):
        CharText(other, seq_len=8, chars=trained.chars)
