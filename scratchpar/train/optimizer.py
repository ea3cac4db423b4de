"""The run's optimizer and learning-rate schedule, from its Config."""

from __future__ import annotations

from .. import optim
from ..optim.mixed import MixedPrecision


def build_optimizer(cfg, params):
    """The optimizer ``--optimizer`` names over ``params``; under EASGD, SGD's momentum is
    Nesterov's: EAMSGD (Zhang et al. 2015, Algorithm 2)."""
    o = cfg.optim
    if o.optimizer == "sgd":
        return optim.SGD(params, o.lr, momentum=o.momentum, weight_decay=o.weight_decay,
                         nesterov=cfg.train.strategy == "easgd" and o.momentum > 0)
    cls = optim.Adam if o.optimizer == "adam" else optim.AdamW
    return cls(params, o.lr, weight_decay=o.weight_decay)


def optimizer_factory(cfg, scaler=None):
    """``make_optimizer(params)``, as every strategy takes it: the optimizer ``--optimizer``
    names over ``params`` (this rank's: its stage's, its shards', its key range's), stepping
    16-bit parameters through fp32 masters under ``--precision fp16|bf16`` (with fp16's loss
    ``scaler``)."""
    def make_optimizer(params):
        optimizer = build_optimizer(cfg, params)
        return optimizer if cfg.train.precision == "fp32" else MixedPrecision(optimizer, scaler)
    return make_optimizer


def build_schedule(cfg):
    """The learning rate per step: constant, or a linear warm-up then a cosine or linear decay."""
    o, steps = cfg.optim, cfg.train.steps
    if o.schedule == "constant":
        return optim.Constant(o.lr)
    cls = optim.WarmupCosine if o.schedule == "cosine" else optim.WarmupLinear
    return cls(o.lr, o.warmup, steps, o.min_lr)
