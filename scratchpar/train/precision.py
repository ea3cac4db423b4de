"""The run's precision: the model in 16 bits with its updates through fp32 masters, and the
checkpoint that holds those masters as its weights."""

from __future__ import annotations

from ..autograd.precision import dtype_of
from ..backend import xp_default
from ..optim.scaler import LossScaler


def apply_precision(cfg, task) -> None:
    """Under ``--precision fp16`` or ``bf16``: ``task``'s model cast to 16 bits, which the
    optimizer steps through fp32 masters (Micikevicius et al. 2018, §3.1;
    :func:`~scratchpar.train.optimizer.optimizer_factory`). fp16 scales the loss (§3.2; its
    scaler is the task's and the optimizer's); bf16, with fp32's exponent range, needs no
    scale. Under fp32, nothing."""
    precision = cfg.train.precision
    if precision != "fp32":
        task.model.to_dtype(dtype_of(precision, xp_default()))
        task.scaler = LossScaler() if precision == "fp16" else None


def fold_masters(state: dict, names: list[str]) -> dict:
    """A strategy's whole state (``{"model", "optim", …}``) with each parameter's fp32 master
    (``optim["master.<i>"]``, ``names[i]``) in its weights' place: a checkpoint then holds the
    weights as the run knows them, whatever its precision, and resumes under any. A rank's own
    part ``"<who>.optim"`` folds into its ``"<who>.model"``; where it has none (local SGD's
    replicas between averagings), its masters are the run's ``"model"``'s and are dropped."""
    folded = dict(state)
    for part, model_part in _pairs(state):
        optim = folded[part] = dict(state[part])
        masters = {name: optim.pop(f"master.{i}") for i, name in enumerate(names)
                   if f"master.{i}" in optim}
        if model_part in state:
            folded[model_part] = {**state[model_part], **masters}
    return folded


def unfold_masters(state: dict, names: list[str]) -> dict:
    """The inverse under a 16-bit precision: each parameter that has optimizer state takes its
    checkpointed weights as its master, and rounds them into the model as the run would have.
    Under plain SGD the master is all the state a parameter has: once the optimizer has
    stepped, every parameter takes one."""
    unfolded = dict(state)
    for part, model_part in _pairs(state):
        optim = unfolded[part] = dict(state[part])
        model = state.get(model_part, state["model"])
        held = {key.rpartition(".")[2] for key in optim if "." in key}
        stepped = not held and optim.get("step_count", 0) > 0
        for i, name in enumerate(names):
            if str(i) in held or stepped:
                optim[f"master.{i}"] = model[name]
    return unfolded


def _pairs(state: dict) -> list[tuple[str, str]]:
    """Each optimizer part of ``state`` and the model part its weights are in."""
    return [(part, part[: -len("optim")] + "model") for part in state
            if part == "optim" or part.endswith(".optim")]
