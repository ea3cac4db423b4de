"""Optimizers, gradient clipping and learning-rate schedules."""

from scratchpar.optim.adam import Adam, AdamW
from scratchpar.optim.clip import clip_grad_norm, global_grad_norm
from scratchpar.optim.guard import guarded_step, skipped
from scratchpar.optim.optimizer import Optimizer
from scratchpar.optim.schedule import Constant, WarmupCosine, WarmupLinear, linear_scaling
from scratchpar.optim.sgd import SGD

__all__ = [
    "SGD",
    "Adam",
    "AdamW",
    "Constant",
    "Optimizer",
    "WarmupCosine",
    "WarmupLinear",
    "clip_grad_norm",
    "global_grad_norm",
    "guarded_step",
    "linear_scaling",
    "skipped",
]
