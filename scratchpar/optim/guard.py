"""A guarded update: a step whose loss or gradient is not finite is skipped, never applied."""

from __future__ import annotations

import math

import numpy as np

from scratchpar.backend import get_array_module
from scratchpar.optim.clip import clip_grad_norm, grad_norm_array


def guarded_step(optimizer, params, loss, grad_clip: float = 0.0, norm=None) -> dict:
    """Clip to ``grad_clip`` (if > 0) and step, unless ``loss`` or the global gradient norm
    ``norm`` (computed here if not given) is not finite: then the parameters and the optimizer
    state stay as they were, as a loss scaler skips an overflowed step (Micikevicius et al.
    2018, §3.2), and the caller counts the skip unless the optimizer's loss scale took the
    blame (``"overflow"``). ``{"loss", "grad_norm", "skipped"}``, ``grad_norm`` the unscaled
    norm.

    ``loss`` and ``norm`` may be numbers or 0-d device arrays: the verdict reads both in one
    copy, the step's one wait for the device."""
    loss, norm = read_scalars(loss, grad_norm_array(params) if norm is None else norm)
    if not (math.isfinite(loss) and math.isfinite(norm)):
        return refused(optimizer, loss, norm)
    norm /= optimizer.grad_scale  # the gradients carry the loss scale until the update
    if grad_clip > 0:
        clip_grad_norm(params, grad_clip, norm)
    optimizer.step()
    return {"loss": loss, "grad_norm": norm, "skipped": False}


def refused(optimizer, loss: float, norm: float) -> dict:
    """The metrics of a step left unapplied because its ``loss`` or its gradient's ``norm``
    (scaled, as backward left it) is not finite: with a finite loss, the gradient's overflow
    is the loss scale's if ``optimizer``'s scale takes the blame (and is halved), not
    divergence. Every caller whose ranks share a verdict gets the same answer on each."""
    norm /= optimizer.grad_scale
    if not math.isfinite(loss):
        return skipped(loss, norm)
    return skipped(loss, norm, overflow=optimizer.overflow())


def backward_verdict(loss, params) -> tuple[float, float, bool]:
    """Backpropagate ``loss`` and read its value and the gradient norm over ``params`` in one
    copy from the device: ``(loss, ‖g‖, both finite)``, a rank's own verdict on its step."""
    loss.backward()
    value, norm = read_scalars(loss.data, grad_norm_array(params))
    return value, norm, math.isfinite(value) and math.isfinite(norm)


def read_scalars(*values) -> list[float]:
    """Host floats of ``values``, numbers or 0-d arrays of one device, in one copy (reading
    each alone would wait for the device once each)."""
    xp = get_array_module(*values)
    if xp is np:
        return [float(v) for v in values]
    return xp.stack([xp.asarray(v, dtype=xp.float64) for v in values]).tolist()


def skipped(loss: float, norm: float, overflow: bool = False) -> dict:
    """The metrics of a step that was not applied; ``overflow``: for a loss scale's overflow,
    which the scale has answered (halved), so that it is not counted as divergence."""
    metrics = {"loss": loss, "grad_norm": norm, "skipped": True}
    if overflow:
        metrics["overflow"] = True
    return metrics
