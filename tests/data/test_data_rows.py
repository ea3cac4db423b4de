"""A batch's rows drawn alone: each source's ``batch(step, b, rows=(start, stop))`` is exactly
rows ``start … stop`` of the whole batch, for every cut."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchpar.data import (
    CharText,
    LowRankRatings,
    SparseLogistic,
    SyntheticClassification,
    SyntheticLanguage,
)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    path = tmp_path_factory.mktemp("rows") / "corpus.txt"
    path.write_text("the quick brown fox jumps over the lazy dog; " * 40, encoding="utf-8")
    return {"synthetic": SyntheticLanguage(vocab_size=24, seq_len=16, seed=3),
            "text": CharText(str(path), seq_len=12, seed=2),
            "classification": SyntheticClassification(n_features=6, n_classes=3, seed=1),
            "sparse": SparseLogistic(n_features=40, nnz=4, seed=4),
            "ratings": LowRankRatings(n_users=9, n_items=7, rank=2, seed=5)}


def _arrays(batch):
    return batch if isinstance(batch, tuple) else (batch,)


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(["synthetic", "text", "classification", "sparse", "ratings"]),
       step=st.integers(0, 10**6), batch_size=st.integers(1, 40), data=st.data())
def test_rows_drawn_alone_are_those_rows_of_the_whole_batch(sources, name, step, batch_size,
                                                             data):
    source = sources[name]
    start = data.draw(st.integers(0, batch_size))
    stop = data.draw(st.integers(start, batch_size))
    whole = _arrays(source.batch(step, batch_size))
    part = _arrays(source.batch(step, batch_size, (start, stop)))
    assert len(part) == len(whole)
    for got, want in zip(part, whole):
        assert got.dtype == want.dtype and got.shape == (stop - start,) + want.shape[1:]
        np.testing.assert_array_equal(got, want[start:stop])


def test_a_cut_holds_none_of_the_whole_batch(sources):
    x, y = sources["classification"].batch(2, 64, (8, 16))
    assert x.base is None and y.base is None  # copies: the whole batch is freed


@pytest.mark.parametrize("rows, message", [((3, 2), "not within"), ((0, 9), "not within"),
                                            ((-1, 2), "start must be >= 0"),
                                            ((0.5, 2), "must be an integer")])
def test_rows_outside_the_batch_are_refused(sources, rows, message):
    for source in sources.values():
        with pytest.raises(ValueError, match=message):
            source.batch(0, 8, rows)
