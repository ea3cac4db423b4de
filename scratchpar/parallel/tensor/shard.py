"""From one model to its tensor-parallel shards, and from the shards back to whole tensors."""

from __future__ import annotations

from ...nn import GPT, MLP
from ...nn.layers import Dropout, set_dropout_generator
from ...nn.moe import MixtureOfExperts
from .gpt import TensorParallelGPT
from .layout import Split
from .mlp_classifier import TensorParallelMLP


def tensor_parallel(model, comm, sequence_parallel: bool = False):
    """Rank ``comm.rank``'s shard of the single-device ``model`` (a GPT or an MLP), cut from
    that model's own weights: parameters keep the model's names and order, each with its
    layout (``layout.layouts``), so shards gather back into the model and parity tests start
    from one set of weights. Dropout draws from the model's own stream."""
    if isinstance(model, GPT):
        if sequence_parallel and any(
                isinstance(m, MixtureOfExperts) for _, m in model.named_modules()):
            raise ValueError("sequence parallelism cuts a sparse block's tokens over tp, which "
                             "its routing does not count yet: run the experts without it")
        shard = TensorParallelGPT(model, comm, sequence_parallel)
    elif isinstance(model, MLP):
        if sequence_parallel:
            raise ValueError("sequence parallelism shards a transformer's sequence; an MLP "
                             "has none")
        shard = TensorParallelMLP(model, comm)
    else:
        raise TypeError(f"{type(model).__name__} has no tensor-parallel form (GPT and MLP do)")
    gen = next((m.gen for _, m in model.named_modules()
                if isinstance(m, Dropout) and m.gen is not None), None)
    if gen is not None:
        set_dropout_generator(shard, gen)
    return shard


def join(parts: list[dict], layout_of: dict) -> dict:
    """Whole tensors from every tp rank's flat state (in rank order): a ``Split`` key's shards
    joined, any other key taken from rank 0 (replicated alike)."""
    return {key: (layout_of[key].join([part[key] for part in parts])
                  if isinstance(layout_of.get(key), Split) else value)
            for key, value in parts[0].items()}


def take(whole: dict, layout_of: dict, rank: int, size: int) -> dict:
    """Rank ``rank``'s shard of a flat state of whole tensors (the inverse of :func:`join`)."""
    return {key: (layout_of[key].take(value, rank, size)
                  if isinstance(layout_of.get(key), Split) else value)
            for key, value in whole.items()}
