"""Steps to a target against batch size, and where its regimes turn.

McCandlish et al. 2018 (§2.3, eq. 2.11) find that the steps S and the examples E = B·S a run
needs to reach a given loss trade off as

    (S/S_min − 1)(E/E_min − 1) = 1,

S_min the fewest steps (an infinite batch) and E_min the fewest examples (a batch of one). With
E = B·S this is S(B) = S_min + E_min/B: perfect scaling (S ∝ 1/B) well below the critical batch
B_crit = E_min/S_min, no gain well above it, and diminishing returns between (Shallue et al.
2019, §4's three regimes). Fitting that line in 1/B gives all three numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from .fit import least_squares


@dataclass(frozen=True)
class Regimes:
    """S_min, E_min (rows) and the rms relative residual of the fit."""

    s_min: float
    e_min: float
    rms: float = 0.0

    @property
    def b_crit(self) -> float:
        """The critical batch E_min/S_min (rows): S and E each twice their least there."""
        return self.e_min / self.s_min

    def steps(self, batch: float) -> float:
        """S(B) = S_min + E_min/B."""
        return self.s_min + self.e_min / batch


def fit(batches, steps) -> Regimes:
    """S_min and E_min of S = S_min + E_min/B over measured (batch, steps) pairs, on relative
    residuals, so that a run of 10 steps weighs as much as one of 10,000."""
    if len(batches) != len(steps):
        raise ValueError(f"{len(batches)} batch sizes against {len(steps)} step counts")
    if any(b <= 0 for b in batches):
        raise ValueError(f"every batch size must be positive, got {list(batches)}")
    (s_min, e_min), rms = least_squares([(1.0, 1.0 / b) for b in batches], steps)
    return Regimes(float(s_min), float(e_min), rms)
