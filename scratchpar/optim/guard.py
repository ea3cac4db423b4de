"""A guarded update: a step whose loss or gradient is not finite is skipped, never applied."""

from __future__ import annotations

import math

from scratchpar.optim.clip import clip_grad_norm, global_grad_norm


def guarded_step(optimizer, params, loss: float, grad_clip: float = 0.0,
                 norm: float | None = None) -> dict:
    """Clip to ``grad_clip`` (if > 0) and step, unless ``loss`` or the global gradient norm
    ``norm`` (computed here if not given) is not finite: then the parameters and the optimizer
    state stay as they were, as a loss scaler skips an overflowed step (Micikevicius et al.
    2018, §3.2), and the caller counts the skip. ``{"loss", "grad_norm", "skipped"}``."""
    norm = global_grad_norm(params) if norm is None else norm
    if not (math.isfinite(loss) and math.isfinite(norm)):
        return skipped(loss, norm)
    if grad_clip > 0:
        clip_grad_norm(params, grad_clip, norm)
    optimizer.step()
    return {"loss": loss, "grad_norm": norm, "skipped": False}


def skipped(loss: float, norm: float) -> dict:
    """The metrics of a step that was not applied."""
    return {"loss": loss, "grad_norm": norm, "skipped": True}
