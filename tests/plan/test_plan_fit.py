"""The fits recover the constants of synthetic timings made with known values, and refuse what
cannot be fitted."""

import numpy as np
import pytest

from scratchpar.plan.fit import alpha_beta, least_squares, per_unit

SIZES = [8 << (2 * k) for k in range(11)]  # calibration's: 8 B … 8 MiB


def test_alpha_and_beta_of_a_link_come_back_from_exact_and_noisy_timings():
    alpha, beta = 5.7e-6, 4.2e-10  # 5.7 µs a message, 2.4 GB/s
    exact = [alpha + n * beta for n in SIZES]
    got = alpha_beta([(1, n) for n in SIZES], exact)
    assert got["alpha_s"] == pytest.approx(alpha, rel=1e-9)
    assert got["beta_s_per_byte"] == pytest.approx(beta, rel=1e-9)
    assert got["rms_rel_residual"] < 1e-9
    noisy = list(np.array(exact) * np.random.default_rng(0).uniform(0.97, 1.03, len(SIZES)))
    got = alpha_beta([(1, n) for n in SIZES], noisy)
    assert got["alpha_s"] == pytest.approx(alpha, rel=0.05)
    assert got["beta_s_per_byte"] == pytest.approx(beta, rel=0.05)
    assert 0.005 < got["rms_rel_residual"] < 0.03


def test_a_cost_per_unit_and_per_call_come_back():
    fixed, gamma = 2e-6, 2.3e-11
    got = per_unit(SIZES, [fixed + n * gamma for n in SIZES])
    assert got["fixed_s"] == pytest.approx(fixed, rel=1e-9)
    assert got["per_unit_s"] == pytest.approx(gamma, rel=1e-9)


def test_three_terms_come_back_together():
    coef = np.array([3e-6, 1e-10, 4e-11])  # α, β, γ: messages, bytes sent, bytes reduced
    terms = [(m, b, r) for m in (1, 2, 6) for b in (1e3, 1e6) for r in (0, 5e5)]
    got, rms = least_squares(terms, [float(np.dot(t, coef)) for t in terms])
    np.testing.assert_allclose(got, coef, rtol=1e-9)
    assert rms < 1e-9


@pytest.mark.parametrize("terms, seconds, says", [
    ([(1, 8)], [1e-6], "1 timings cannot fit 2 coefficients"),
    ([(1, 8), (1, 16)], [1e-6, 0.0], "every timing must be positive"),
    ([(1, 8), (1, 16)], [1e-6], "cannot fit")])
def test_what_cannot_be_fitted_is_refused(terms, seconds, says):
    with pytest.raises(ValueError, match=says):
        least_squares(terms, seconds)
