"""LowRankRatings: batches pure in (seed, step), unit-variance ratings of a low-rank matrix at
uniform entries, and the exact floor noise²/2 that its true factors meet."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchpar.data import LowRankRatings


@settings(max_examples=30, deadline=None)
@given(users=st.integers(1, 50), items=st.integers(1, 50), rank=st.integers(1, 6),
       noise=st.sampled_from([0.0, 0.1, 2.0]), seed=st.integers(0, 2**32),
       step=st.integers(0, 2**40), batch_size=st.integers(1, 40))
def test_batches_are_pure_and_well_formed(users, items, rank, noise, seed, step, batch_size):
    data = LowRankRatings(users, items, rank, noise, seed=seed)
    user, item, rating = data.batch(step, batch_size)
    assert (user.shape, item.shape, rating.shape) == ((batch_size,),) * 3
    assert (user.dtype, item.dtype, rating.dtype) == (np.int64, np.int64, np.float32)
    assert 0 <= user.min() and user.max() < users and 0 <= item.min() and item.max() < items
    again = LowRankRatings(users, items, rank, noise, seed=seed).batch(step, batch_size)
    for a, b in zip(again, (user, item, rating)):
        np.testing.assert_array_equal(a, b)
    if noise == 0.0:  # the matrix's own entries, to float32
        np.testing.assert_allclose(rating, data.mean(user, item), rtol=1e-6, atol=1e-7)


def test_the_matrix_has_its_rank_and_unit_variance_ratings():
    data = LowRankRatings(60, 50, 3, noise=0.0, seed=1)
    full = data.users @ data.items.T  # (U, I)
    assert np.linalg.matrix_rank(full) == 3
    _, _, rating = data.batch(0, 20000)
    assert rating.var() == pytest.approx(1.0, abs=0.15)  # one draw of the factors
    assert abs(rating.mean()) < 0.1


def test_observed_entries_are_uniform_over_the_matrix():
    data = LowRankRatings(5, 4, 2, seed=0)
    user, item, _ = data.batch(3, 40000)
    cells = np.bincount(user * 4 + item, minlength=20) / len(user)  # (20,)
    assert np.all(np.abs(cells - 1 / 20) < 5 * math.sqrt((1 / 20) * (19 / 20) / len(user)))


@pytest.mark.parametrize("noise", [0.0, 0.1, 0.7])
def test_the_floor_is_half_the_noise_variance_and_the_true_factors_meet_it(noise):
    data = LowRankRatings(200, 150, 4, noise, seed=2)
    assert data.bayes_risk() == 0.5 * noise * noise
    losses = np.concatenate([0.5 * (data.mean(u, i) - r) ** 2
                             for u, i, r in (data.batch(s, 5000) for s in range(8))])
    if noise == 0.0:
        assert losses.max() < 1e-12  # float32 rounding alone
    else:
        se = losses.std() / math.sqrt(len(losses))
        assert abs(losses.mean() - data.bayes_risk()) < 4 * se


def test_steps_and_seeds_differ():
    data = LowRankRatings(seed=0)
    assert not np.array_equal(data.batch(0, 8)[2], data.batch(1, 8)[2])
    assert not np.array_equal(LowRankRatings(seed=1).users, data.users)
    assert (data.n_users, data.n_items, data.rank, data.noise) == (200, 200, 4, 0.1)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"n_users": 0}, "n_users"), ({"n_items": -1}, "n_items"), ({"rank": 0}, "rank"),
    ({"noise": -0.1}, "noise"), ({"noise": float("inf")}, "noise"), ({"noise": "0.1"}, "noise"),
    ({"seed": -1}, "seed"),
])
def test_bad_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LowRankRatings(**kwargs)
