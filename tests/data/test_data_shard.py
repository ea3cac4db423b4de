"""shard: the ranks' pieces of a batch tile it in order, near-equal, a tuple cut alike."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scratchpar.data import shard
from scratchpar.data.shard import Part


@given(rows=st.integers(0, 30), size=st.integers(1, 6))
def test_the_pieces_tile_the_batch_in_rank_order(rows, size):
    x = np.arange(rows * 2).reshape(rows, 2)
    y = np.arange(rows) * 10
    pieces = [shard((x, y), r, size) for r in range(size)]
    np.testing.assert_array_equal(np.concatenate([p[0] for p in pieces]), x)
    np.testing.assert_array_equal(np.concatenate([p[1] for p in pieces]), y)
    lengths = [len(shard(x, r, size)) for r in range(size)]
    assert max(lengths) - min(lengths) <= 1 and lengths == sorted(lengths, reverse=True)
    for px, py in pieces:
        np.testing.assert_array_equal(py, px[:, 0] * 5)  # rows stay paired


def test_bad_rank_or_ragged_tuple_is_refused():
    with pytest.raises(ValueError, match="rank"):
        shard(np.zeros(3), 2, 2)
    with pytest.raises(ValueError, match="rows"):
        shard((np.zeros(3), np.zeros(4)), 0, 2)


def test_a_part_is_its_rows_when_they_are_the_rank_s_and_refused_when_not():
    whole = np.arange(14).reshape(7, 2)
    mine = Part(whole[4:7], 4, 7, 7)  # rank 1 of 2 reads rows 4..7
    assert shard(mine, 1, 2) is mine.batch
    with pytest.raises(ValueError, match=r"rank 0 of 2 reads rows 0\.\.4 of 7, but holds 4\.\.7"):
        shard(mine, 0, 2)
