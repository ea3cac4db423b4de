"""Time to a target loss: at each global batch, the fastest layout's predicted step that fits
and equals one device's, times the steps the run needs at that batch, S(B) = S_min + E_min/B
(``regimes.py``; fitted to measured runs by ``python -m scratchpar.batch steps``).

A larger batch makes each step longer and the steps fewer. Below the critical batch the steps
fall almost as fast as the batch grows, so the time falls with more ranks' worth of rows; above
it the steps stop falling and the time grows with the step (McCandlish et al. 2018, §2.3).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..table import table
from .rank import Ranked, exact, name, ranked
from .regimes import Regimes


@dataclass(frozen=True)
class Reach:
    """A global batch, its fastest exact layout that fits, and the steps the run needs there."""

    batch: int
    best: Ranked
    steps: float

    @property
    def seconds(self) -> float:
        return self.best.step.step_s * self.steps


def at_batch(run: list[str], batch: int) -> list[str]:
    """The run's flags with its ``--batch-size`` (given or not) replaced by ``batch``."""
    kept, flags = [], iter(run)
    for flag in flags:
        if flag == "--batch-size":
            next(flags, None)
        elif not flag.startswith("--batch-size="):
            kept.append(flag)
    return [*kept, "--batch-size", str(batch)]


def reaches(run: list[str], world: int, profile, regimes: Regimes, batches: list[int],
            budget: int | None = None) -> list[Reach]:
    """Per batch of ``batches`` (the run's ``--batch-size`` replaced), its best layout and the
    time to the target; fastest first. A batch no exact layout fits is left out."""
    found = []
    for batch in batches:
        rows = [r for r in ranked(at_batch(run, batch), world, profile, budget)
                if r.fit.fits and exact(r.layout.cfg)]
        if rows:
            found.append(Reach(batch, rows[0], regimes.steps(batch)))
    return sorted(found, key=lambda r: r.seconds)


def show(found: list[Reach], world: int, profile, regimes: Regimes) -> str:
    """The table of batches by predicted time to the target."""
    cells = [{"#": i + 1, "batch": r.batch, "layout": name(r.best.layout),
              "ms": 1e3 * r.best.step.step_s, "steps": r.steps, "s": r.seconds,
              "gib": r.best.fit.need / 2**30} for i, r in enumerate(found)]
    return table(f"time to the target on {world} ranks of {profile.name}: S(B) = "
                 f"{regimes.s_min:g} + {regimes.e_min:g}/B steps (B_crit {regimes.b_crit:.0f} "
                 "rows), each batch at its fastest exact layout that fits", cells,
                 {"#": "#", "batch": "batch", "layout": "layout", "step ms": "{ms:.3f}",
                  "steps": "{steps:,.0f}", "to the target, s": "{s:,.1f}",
                  "GiB/rank": "{gib:.2f}"})
