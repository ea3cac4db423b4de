"""A block of one view is filled exactly from pieces cut in any other: replicas, ZeRO's flat
ranges, tensor-parallel boxes of a split view; and a target the pieces leave short is refused."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchpar.comm.chunks import bounds
from scratchpar.parallel.pieces import Block, Piece, fill, shared_out, whole_pieces


def flat_pieces(whole: np.ndarray, ranks: int):
    """ZeRO's cut: near-equal ranges of the raveled array."""
    return [Block.flat(whole.shape, lo, hi) for lo, hi in bounds(whole.size, ranks)]


def heads_pieces(whole: np.ndarray, ranks: int):
    """A fused QKV weight W[C, 3·H·d] cut by heads: boxes of the view (C, 3, H, d)."""
    c, h = whole.shape[0], 4
    view = (c, 3, h, whole.shape[1] // (3 * h))
    return [Block.cut(whole.shape, view, 2, lo, hi) for lo, hi in bounds(h, ranks)]


def rows_pieces(whole: np.ndarray, ranks: int):
    """A row-parallel cut: boxes of the array's own shape along axis 0."""
    return [Block.cut(whole.shape, whole.shape, 0, lo, hi) for lo, hi in bounds(len(whole), ranks)]


CUTS = {"flat": flat_pieces, "heads": heads_pieces, "rows": rows_pieces,
        "whole": lambda whole, ranks: [Block.full(whole.shape)]}


def read(target: Block, whole: np.ndarray, blocks) -> np.ndarray:
    out = np.full(target.shape, np.nan)
    fill(target, out, [(b, lambda b=b: b.take(whole).copy()) for b in blocks], "w")
    return out


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(CUTS)), st.integers(1, 5), st.sampled_from(sorted(CUTS)),
       st.integers(1, 5), st.integers(1, 3), st.integers(1, 3))
def test_any_cut_is_read_back_from_any_other(saved, n_saved, wanted, n_wanted, c, d):
    whole = np.arange(c * 5 * 3 * 4 * d, dtype=np.float64).reshape(c * 5, 3 * 4 * d) * 1.5 - 7
    stored = CUTS[saved](whole, n_saved)
    assert sum(b.size for b in stored) == whole.size
    for target in CUTS[wanted](whole, n_wanted):
        np.testing.assert_array_equal(read(target, whole, stored), target.take(whole))


def test_a_block_the_pieces_do_not_cover_is_refused():
    whole = np.arange(12.0).reshape(3, 4)
    stored = flat_pieces(whole, 3)[:2]  # the last third is missing
    with pytest.raises(ValueError, match="w: the checkpoint holds 4 of the 8 elements"):
        read(Block.cut(whole.shape, whole.shape, 0, 1, 3), whole, stored)


def test_a_block_outside_its_view_says_so():
    assert Block((3, 4), (12,), (10,), (4,)).problems() == [
        "box at (10,) of shape (4,) is not inside (12,)"]
    assert Block((3, 4), (13,), (0,), (4,)).problems() == [
        "view (13,) does not hold the (3, 4) array's elements"]


@given(st.lists(st.integers(1, 40), min_size=1, max_size=8), st.integers(1, 5))
def test_a_replica_is_shared_out_once_and_near_evenly(sizes, ranks):
    state = {"model": {f"w{i}": np.zeros(n) for i, n in enumerate(sizes)},
             "optim": {"step_count": 3, "lr": np.float64(0.5)}}
    pieces, scalars = whole_pieces(state)
    assert scalars == {"model": {}, "optim": {"step_count": 3, "lr": 0.5}}
    shares = [shared_out(pieces, r, ranks) for r in range(ranks)]
    assert sorted(p.name for share in shares for p in share) == sorted(state["model"])
    written = [sum(p.array.nbytes for p in share) for share in shares]
    assert max(written) - min(written) <= 8 * max(sizes)  # greedy: within the largest piece
    assert all(isinstance(p, Piece) and p.block.is_full for p in pieces)
    assert math.prod(pieces[0].block.whole) == pieces[0].array.size
