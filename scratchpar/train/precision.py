"""The run's precision: the model in 16 bits with its updates through fp32 masters, and a
checkpoint read at either precision, its masters as the weights."""

from __future__ import annotations

from ..autograd.precision import dtype_of
from ..backend import xp_default
from ..nn.moe import MixtureOfExperts
from ..optim.scaler import LossScaler
from .stored import Whole


def apply_precision(cfg, task) -> None:
    """Under ``--precision fp16`` or ``bf16``: ``task``'s model cast to 16 bits, which the
    optimizer steps through fp32 masters (Micikevicius et al. 2018, §3.1;
    :func:`~scratchpar.train.optimizer.optimizer_factory`). fp16 scales the loss (§3.2; its
    scaler is the task's and the optimizer's); bf16, with fp32's exponent range, needs no
    scale. Under fp32, nothing. A sparse model's routers carry the same scale into their
    auxiliary losses' backward."""
    precision = cfg.train.precision
    if precision != "fp32":
        task.model.to_dtype(dtype_of(precision, xp_default()))
        task.scaler = LossScaler() if precision == "fp16" else None
        for _, module in task.model.named_modules():
            if isinstance(module, MixtureOfExperts):
                module.scaler = task.scaler


class AtPrecision(Whole):
    """A checkpoint (:class:`~scratchpar.train.stored.Stored`) as a run at fp32 (``sixteen``
    false) or at 16 bits reads it, whatever precision wrote it. A checkpoint holds what the
    ranks held: under 16 bits, the weights and each parameter's fp32 master
    (``"master.<i>"`` of an optimizer part, ``names[i]``). At fp32 the masters are the
    weights: a part ``"<who>.optim"``'s go to its ``"<who>.model"``, or nowhere where it has
    none (local SGD's replicas between averagings). At 16 bits the weights are rounded from
    the masters as the run would have; a checkpoint without them (an fp32 run's) gives each
    parameter that has optimizer state its weights as its master, and under plain SGD, whose
    masters are all its state, every parameter once the optimizer has stepped. A block of an
    array reads the same as the whole of it: a sharded strategy reads only its own."""

    def __init__(self, stored, names: list[str], sixteen: bool):
        self.stored, self.meta = stored, stored.meta
        parts = stored.parts()
        self.source = {(part, name): (part, name) for part in parts for name in stored.names(part)}
        for optim, model in _pairs(parts):
            for key in [n for n in stored.names(optim) if n.startswith("master.")]:
                del self.source[(optim, key)]
                if model in parts:
                    self.source[(model, names[int(key.rpartition(".")[2])])] = (optim, key)
            if sixteen:
                scalars = stored.scalars(optim)
                held = {key.rpartition(".")[2] for key in [*self.names(optim), *scalars]
                        if "." in key}
                stepped = not held and scalars.get("step_count", 0) > 0
                weights = model if model in parts else "model"
                for i, name in enumerate(names):
                    if (str(i) in held or stepped) and (weights, name) in self.source:
                        self.source[(optim, f"master.{i}")] = self.source[(weights, name)]

    def parts(self) -> list[str]:
        return self.stored.parts()

    def names(self, part: str) -> list[str]:
        return [name for p, name in self.source if p == part]

    def scalars(self, part: str) -> dict:
        return self.stored.scalars(part)

    def read(self, part: str, name: str, block=None):
        return self.stored.read(*self.source.get((part, name), (part, name)), block)



def _pairs(parts) -> list[tuple[str, str]]:
    """Each optimizer part among ``parts`` and the model part its weights are in."""
    return [(part, part[: -len("optim")] + "model") for part in parts
            if part == "optim" or part.endswith(".optim")]
