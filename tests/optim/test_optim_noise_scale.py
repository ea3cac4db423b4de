"""The gradient noise scale's estimator (McCandlish et al. 2018, Appendix A.1) against a problem
whose |G|² and tr(Σ) are known exactly: least squares with Gaussian inputs."""

import numpy as np
import pytest

from scratchpar.optim.noise_scale import NoiseScale, Sample, estimate

D, SIGMA = 8, 0.5  # input features; the noise of the targets
U = np.linspace(-1.0, 1.0, D) * 0.3  # w − w*: where the gradient is taken
SHARDS = [3, 0, 7, 14]  # rows per rank, one holding none; B = 24
TRIALS = 4000


def exact() -> tuple[float, float]:
    """|G|² and tr(Σ) of one row's gradient g = (u·x − ε)·x of ½(w·x − y)², with y = w*·x + ε,
    x ~ N(0, I_D), ε ~ N(0, σ²): G = E[x xᵀ]u = u, and E|g|² = |u|²(D + 2) + σ²D (along u,
    E[z²(z² + χ²_{D−1})] = 3 + D − 1), so tr(Σ) = |u|²(D + 1) + σ²D."""
    u2 = float(U @ U)
    return u2, u2 * (D + 1) + SIGMA**2 * D


def sampled(seed: int = 0):
    """Per trial, every shard's and the whole batch's mean gradient, squared norms."""
    gen = np.random.default_rng(seed)
    rows = sum(SHARDS)
    x = gen.standard_normal((TRIALS, rows, D))
    eps = SIGMA * gen.standard_normal((TRIALS, rows))
    g = ((x @ U) - eps)[..., None] * x  # (TRIALS, B, D): each row's gradient
    edges = np.cumsum([0, *SHARDS])
    small = np.stack([(g[:, a:b].mean(axis=1) ** 2).sum(axis=1) if b > a else np.zeros(TRIALS)
                      for a, b in zip(edges[:-1], edges[1:])], axis=1)  # (TRIALS, shards)
    big = (g.mean(axis=1) ** 2).sum(axis=1)  # (TRIALS,)
    return small, big


def test_the_estimates_are_exact_on_their_expectations():
    g2, trace = 0.7, 5.0
    rows = [5, 0, 2, 9]
    small = [g2 + trace / b if b else 123.0 for b in rows]  # a shard of no rows is ignored
    got = estimate(small, rows, g2 + trace / sum(rows))
    assert got.gradient_sq == pytest.approx(g2) and got.trace == pytest.approx(trace)


def test_unequal_shards_one_of_them_empty_estimate_without_bias():
    small, big = sampled()
    found = [estimate(s, SHARDS, b) for s, b in zip(small, big)]
    for value, want in zip(zip(*[(f.gradient_sq, f.trace) for f in found]), exact()):
        value = np.asarray(value)
        error = value.std() / np.sqrt(TRIALS)
        assert error < 0.05 * want  # the check can tell a bias of a few percent
        assert abs(value.mean() - want) < 4 * error


def test_b_simple_is_the_ratio_of_the_averages():
    small, big = sampled(seed=1)
    scale = NoiseScale(decay=0.999)
    for s, b in zip(small, big):
        value = scale.update(estimate(s, SHARDS, b))
    g2, trace = exact()
    assert value == pytest.approx(trace / g2, rel=0.1)
    assert value == scale.trace / scale.gradient_sq


def test_one_shard_with_rows_tells_nothing():
    assert estimate([1.0, 0.0], [4, 0], 1.0) is None
    assert estimate([2.0], [4], 2.0) is None
    scale = NoiseScale()
    assert scale.update(None) is None  # nothing folded in yet
    scale.update(Sample(1.0, 8.0))
    assert scale.update(None) == pytest.approx(8.0)  # a step without a sample keeps it


def test_a_noise_scale_resumes_from_its_state_and_refuses_a_bad_decay():
    scale = NoiseScale(decay=0.5)
    scale.update(Sample(2.0, 6.0))
    again = NoiseScale(decay=0.5)
    again.load_state_dict(scale.state_dict())
    assert again.update(Sample(1.0, 1.0)) == scale.update(Sample(1.0, 1.0))
    with pytest.raises(ValueError, match="decay must lie in"):
        NoiseScale(decay=1.0)
