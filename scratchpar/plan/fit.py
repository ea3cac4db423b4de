"""Cost models fitted to measured times by least squares on the relative residuals."""

from __future__ import annotations

import numpy as np


def least_squares(terms, seconds) -> tuple[np.ndarray, float]:
    """Coefficients c minimising the *relative* residuals of t ≈ terms · c, and their rms.
    ``terms`` (S, k): each sample's counts (messages, bytes, …); ``seconds`` (S,). Relative,
    so that a 4 KiB message weighs as much as a 64 MiB one."""
    a = np.asarray(terms, dtype=np.float64)  # (S, k)
    t = np.asarray(seconds, dtype=np.float64)  # (S,)
    if a.ndim != 2 or len(a) != len(t) or len(t) < a.shape[1]:
        raise ValueError(f"{len(t)} timings cannot fit {a.shape[-1]} coefficients")
    if not np.all(t > 0):
        raise ValueError("every timing must be positive")
    coef, *_ = np.linalg.lstsq(a / t[:, None], np.ones_like(t), rcond=None)
    residual = (a @ coef - t) / t  # (S,)
    return coef, float(np.sqrt(np.mean(residual ** 2)))


def alpha_beta(terms, seconds) -> dict:
    """α (seconds per message) and β (seconds per byte) of t = m·α + b·β (Hockney 1994: a
    message of n bytes costs α + n·β; m messages in a row, b bytes on a rank's critical
    path), from (m, b) per timing; and the rms relative residual."""
    (alpha, beta), rms = least_squares(terms, seconds)
    return {"alpha_s": float(alpha), "beta_s_per_byte": float(beta), "rms_rel_residual": rms}


def per_unit(units, seconds) -> dict:
    """c₀ (seconds per call) and c₁ (seconds per unit) of t = c₀ + n·c₁, from n per timing;
    and the rms relative residual: a reduction's γ per byte, an op's cost per element."""
    (fixed, each), rms = least_squares([(1.0, n) for n in units], seconds)
    return {"fixed_s": float(fixed), "per_unit_s": float(each), "rms_rel_residual": rms}
