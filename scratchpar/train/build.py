"""Assemble a Trainer from a Config: device, task, optimizer, schedule and strategy."""

from __future__ import annotations

from .. import optim
from ..backend import rng, set_device
from ..parallel import SingleDevice
from .loop import Trainer
from .task import build_task


def build_optimizer(cfg, params):
    o = cfg.optim
    if o.optimizer == "sgd":
        return optim.SGD(params, o.lr, momentum=o.momentum, weight_decay=o.weight_decay)
    cls = optim.Adam if o.optimizer == "adam" else optim.AdamW
    return cls(params, o.lr, weight_decay=o.weight_decay)


def build_schedule(cfg):
    o, steps = cfg.optim, cfg.train.steps
    if o.schedule == "constant":
        return optim.Constant(o.lr)
    cls = optim.WarmupCosine if o.schedule == "cosine" else optim.WarmupLinear
    return cls(o.lr, o.warmup, steps, o.min_lr)


def build_trainer(cfg) -> Trainer:
    set_device(cfg.train.device)
    dropout_gen = rng(cfg.train.seed, 1)
    task = build_task(cfg, dropout_gen)
    optimizer = build_optimizer(cfg, task.model.parameters())
    strategy = SingleDevice(task.model, optimizer, task.loss, cfg.optim.grad_clip)
    return Trainer(cfg, strategy, task, build_schedule(cfg), dropout_gen)
