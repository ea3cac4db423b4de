"""The step benchmark's two models, each as contenders that train from identical weights."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ... import nn
from ...autograd import Tensor
from ...autograd import functional as F
from ...backend import sync, to_device, to_host
from ..timing import Timed
from .floor import HandMLP

LR = 0.01
MLP_SIZES, MLP_BATCH = [784, 512, 512, 10], 128
GPT_CONFIG = {"vocab_size": 64, "max_len": 64, "d_model": 128, "n_heads": 4, "n_layers": 2}
GPT_BATCH = 16


@dataclass
class Contender:
    """One implementation of a training step, and a way to read its loss and gradients."""

    name: str
    step: Timed  # forward, backward, SGD update; then the wait for its device
    loss_and_grads: Callable[[], tuple[float, dict]]  # forward, backward; host grads (in, out)


@dataclass
class Case:
    """One model and its contenders; the first contender is the reference for equivalence.

    scratchpar's model and data are built on the selected device (``backend.set_device``
    first), PyTorch's twins beside it (twins.py); each contender reads its loss and gradients
    back to the host, where they are compared."""

    name: str
    description: str
    contenders: list[Contender]


def torch_twins():
    """The PyTorch twins module, or None when PyTorch is not installed."""
    try:
        from .. import twins
    except ImportError:
        return None
    return twins


def sgd_update(params) -> None:
    """θ ← θ − lr·g in place, as the floor does it (g is scaled in place: it is dropped next)."""
    for p in params:
        p.grad *= LR
        p.data -= p.grad


def scratchpar_contender(model, loss_fn) -> Contender:
    params = model.parameters()

    def loss_and_grads():
        model.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss.item(), {n: to_host(p.grad) for n, p in model.named_parameters()}

    def step():
        model.zero_grad()
        loss_fn().backward()
        sgd_update(params)

    return Contender("scratchpar", Timed(step, sync), loss_and_grads)


def torch_contender(twins, model, loss_fn, device: str) -> Contender:
    params = list(model.parameters())

    def loss_and_grads():
        model.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss.item(), twins.grads_as_numpy(model)

    def step():
        model.zero_grad()
        loss_fn().backward()
        twins.sgd_update(params, LR)

    return Contender("pytorch", Timed(step, twins.sync_for(device)), loss_and_grads)


def floor_contender(model, x, y) -> Contender:
    """The hand-written MLP on the same device as ``model``, its data ``x``, ``y`` there too."""
    layers = [m for m in model if isinstance(m, nn.Linear)]
    floor = HandMLP([m.weight.data for m in layers], [m.bias.data for m in layers], LR)

    def loss_and_grads():
        loss = floor.loss_and_grads(x, y)
        names = [n for n, _ in model.named_parameters()]
        return loss, dict(zip(names, map(to_host, floor.grads)))

    return Contender("floor", Timed(lambda: floor.step(x, y), sync), loss_and_grads)


def mlp_case(device: str, seed: int = 0) -> Case:
    """MLP 784-512-512-10 on a random batch: scratchpar, the hand-written floor and PyTorch."""
    gen = np.random.default_rng(seed)
    model = nn.MLP(MLP_SIZES, gen, dtype=np.float32)
    x = gen.standard_normal((MLP_BATCH, MLP_SIZES[0])).astype(np.float32)  # (B, 784)
    y = gen.integers(0, MLP_SIZES[-1], MLP_BATCH)  # (B,)
    dx, dy = to_device(x), to_device(y)
    tx = Tensor(dx)
    contenders = [scratchpar_contender(model, lambda: F.cross_entropy(model(tx), dy)),
                  floor_contender(model, dx, dy)]
    twins = torch_twins()
    if twins is not None:
        where = twins.device_for(device)
        twin = twins.load_from(twins.TorchMLP(MLP_SIZES).to(where), model)
        ttx, tty = (twins.torch.from_numpy(a).to(where) for a in (x, y))
        contenders.append(torch_contender(
            twins, twin, lambda: twins.F.cross_entropy(twin(ttx), tty), device))
    sizes = "-".join(map(str, MLP_SIZES))
    return Case("mlp", f"MLP {sizes}, batch {MLP_BATCH}, float32, cross-entropy, "
                       f"inline SGD lr {LR}", contenders)


def gpt_case(device: str, seed: int = 0) -> Case:
    """A tiny GPT on random token ids (id 0 is padding): scratchpar and PyTorch."""
    gen = np.random.default_rng(seed)
    model = nn.GPT(**GPT_CONFIG, gen=gen, dropout=0.0, dtype=np.float32)
    batch = gen.integers(0, GPT_CONFIG["vocab_size"], (GPT_BATCH, GPT_CONFIG["max_len"] + 1))
    on_device = to_device(batch)  # (B, T+1)
    contenders = [scratchpar_contender(model, lambda: nn.lm_loss(model, on_device))]
    twins = torch_twins()
    if twins is not None:
        where = twins.device_for(device)
        twin = twins.load_from(twins.TorchGPT(**GPT_CONFIG).to(where), model)
        tbatch = twins.torch.from_numpy(batch).to(where)
        contenders.append(torch_contender(twins, twin, lambda: twins.lm_loss(twin, tbatch),
                                          device))
    c = GPT_CONFIG
    return Case("gpt", f"GPT vocab {c['vocab_size']}, seq {c['max_len']}, d_model {c['d_model']}, "
                       f"{c['n_heads']} heads, {c['n_layers']} layers, batch {GPT_BATCH}, float32, "
                       f"inline SGD lr {LR}", contenders)
