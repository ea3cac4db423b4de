"""Gradient clipping by the global L2 norm over all parameters (torch's clip_grad_norm_)."""

from __future__ import annotations

from scratchpar.autograd.precision import wide
from scratchpar.backend import get_array_module


def grad_norm_array(params):
    """‖(g₁, …, gₙ)‖₂ over the gradients of ``params`` that are not None, as a 0-d array on
    their device (no wait for it); 0.0 if there are none."""
    grads = [p.grad for p in params if p.grad is not None]
    return norm_of(grads) if grads else 0.0


def norm_of(arrays):
    """‖(a₁, …, aₙ)‖₂ over one device's arrays, as a 0-d array (no wait): the one formula every
    gradient norm here uses, so that norms computed in different places agree bit for bit.
    16-bit arrays are summed in fp32: a loss-scaled fp16 gradient's squares overflow fp16."""
    xp = get_array_module(*arrays)
    norms = xp.stack([xp.linalg.norm(wide(a).ravel()) for a in arrays])  # (n,): ‖aᵢ‖₂ each
    return xp.linalg.norm(norms)  # ‖(‖a₁‖, …, ‖aₙ‖)‖₂ = ‖(a₁, …, aₙ)‖₂


def global_grad_norm(params) -> float:
    """:func:`grad_norm_array` read on the host."""
    return float(grad_norm_array(params))


def clip_grad_norm(params, max_norm: float, norm: float | None = None) -> float:
    """Scale all gradients in place by max_norm/(‖g‖ + 1e-6) if that is below 1; return ‖g‖.

    ‖g‖ is the global norm before clipping (:func:`global_grad_norm`, unless the caller passes
    ``norm``, already computed). None gradients are skipped.
    """
    if not max_norm > 0.0:
        raise ValueError(f"max_norm must be > 0, got {max_norm}")
    params = list(params)
    norm = global_grad_norm(params) if norm is None else norm
    scale = max_norm / (norm + 1e-6)
    if scale < 1.0:
        for p in params:
            if p.grad is not None:
                p.grad *= scale
    return norm
