"""The steps-to-target fit recovers S_min and E_min from curves made by its own formula
(McCandlish et al. 2018, eq. 2.11), and its critical batch is where both double."""

import numpy as np
import pytest

from scratchpar.plan.regimes import Regimes, fit

BATCHES = [2**k for k in range(1, 12)]


@pytest.mark.parametrize("s_min, e_min", [(120.0, 6000.0), (35.0, 1e5), (2000.0, 400.0)])
def test_a_curve_of_the_formula_gives_its_constants_back(s_min, e_min):
    truth = Regimes(s_min, e_min)
    got = fit(BATCHES, [truth.steps(b) for b in BATCHES])
    assert got.s_min == pytest.approx(s_min, rel=1e-9)
    assert got.e_min == pytest.approx(e_min, rel=1e-9)
    assert got.rms < 1e-9


def test_the_formula_is_the_papers_tradeoff_and_b_crit_doubles_both():
    r = Regimes(100.0, 3200.0)
    for b in BATCHES:  # (S/S_min − 1)(E/E_min − 1) = 1 with E = B·S
        s = r.steps(b)
        assert (s / r.s_min - 1) * (b * s / r.e_min - 1) == pytest.approx(1.0)
    assert r.b_crit == 32.0
    assert r.steps(r.b_crit) == 2 * r.s_min and r.b_crit * r.steps(r.b_crit) == 2 * r.e_min


def test_noisy_counts_give_the_constants_within_their_noise():
    truth, gen = Regimes(80.0, 20_000.0), np.random.default_rng(0)
    noisy = [truth.steps(b) * (1 + 0.05 * gen.standard_normal()) for b in BATCHES]
    got = fit(BATCHES, noisy)
    assert got.b_crit == pytest.approx(truth.b_crit, rel=0.25) and 0.01 < got.rms < 0.1


def test_bad_input_is_refused_with_its_reason():
    with pytest.raises(ValueError, match="3 batch sizes against 2"):
        fit([1, 2, 4], [10, 5])
    with pytest.raises(ValueError, match="must be positive"):
        fit([0, 2], [10, 5])
    with pytest.raises(ValueError, match="cannot fit 2 coefficients"):
        fit([4], [10])
