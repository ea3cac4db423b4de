"""Losses: the padded language-modelling cross-entropy and the squared error of a regression."""

from __future__ import annotations

from ..autograd import functional as F

PAD = 0


def shift(batch):
    """A padded batch B (b, n+1) → inputs X = B[:, :n] and targets Y = B[:, 1:]."""
    return batch[:, :-1], batch[:, 1:]


def lm_loss(model, batch, reduction: str = "mean"):
    """Next-token cross-entropy of ``model`` on B (b, n+1); padding targets (id 0) do not count."""
    x, y = shift(batch)  # (b, n), (b, n)
    return lm_output_loss(model(x), y, reduction)


def lm_output_loss(logits, y, reduction: str = "mean"):
    """The loss of logits (b, n, V) against targets Y (b, n): what the last pipeline stage
    computes from its output."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1),
                           ignore_index=PAD, reduction=reduction)


def count_targets(batch):
    """How many targets of B (b, n+1) the language-modelling loss counts: a 0-d array on the
    batch's device (reading it on the host would wait for the device)."""
    return (batch[:, 1:] != PAD).sum()


def half_squared_error(pred, target, reduction: str = "mean"):
    """½ Σ (pred − target)² over predictions (B,) and targets (B,), divided by B for
    ``"mean"`` (none → loss 0): the loss of a rating model, whose gradient is the residual.
    16-bit predictions: computed in fp32, as the cross-entropies are."""
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    pred = F.wide(pred)  # (B,)
    residual = pred - target.astype(pred.dtype)  # (B,)
    scale = 0.5 / max(pred.size, 1) if reduction == "mean" else 0.5
    return (residual * residual).sum() * scale
