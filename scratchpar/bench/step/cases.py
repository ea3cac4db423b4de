"""The step benchmark's two models as contenders from identical weights, and the MLP's floor;
on a device, scratchpar with its fused kernels too, and on CUDA its fused step captured."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ... import kernels, nn
from ...autograd import Tensor
from ...autograd import functional as F
from ...backend import get_array_module, sync, to_device, to_host
from ...kernels.graph import Replayed
from ..timing import Timed

LR = 0.01
MLP_SIZES, MLP_BATCH = [784, 512, 512, 10], 128
GPT_CONFIG = {"vocab_size": 64, "max_len": 64, "d_model": 128, "n_heads": 4, "n_layers": 2}
GPT_BATCH = 16
GRAPHS = ("cuda",)  # the devices whose steps can be captured: a CUDA graph is CUDA's


@dataclass
class Contender:
    """One implementation of a training step, and a way to read its loss and gradients."""

    name: str
    step: Timed  # forward, backward, SGD update; then the wait for its device
    loss_and_grads: Callable[[], tuple[float, dict]]  # forward, backward; host grads (in, out)


@dataclass
class Case:
    """One model and its contenders, the first (scratchpar's) the reference for equivalence."""

    name: str
    description: str
    contenders: list[Contender]


class HandMLP:
    """(B, D) → (B, C): the floor, Linear–ReLU stacks by hand in NumPy or CuPy with no autograd,
    SGD in place, on copies of each layer's W (D_in, D_out) and b (D_out,)."""

    def __init__(self, weights: list, biases: list, lr: float):
        self.params = [t.copy() for wb in zip(weights, biases) for t in wb]  # W₀, b₀, W₁, …
        self.lr, self.grads = lr, []

    def forward_backward(self, x, y):
        """Mean softmax cross-entropy as a 0-d array (no host read); leaves [gW₀, gb₀, gW₁, …]
        in ``self.grads``."""
        xp, weights, biases = get_array_module(x), self.params[::2], self.params[1::2]
        n = x.shape[0]
        rows = xp.arange(n)
        acts = [x]  # the input of each layer; ReLU outputs double as their own masks
        for w, b in zip(weights[:-1], biases[:-1]):
            h = acts[-1] @ w  # (B, D_out)
            h += b
            h *= h > 0  # ReLU in place
            acts.append(h)
        z = acts[-1] @ weights[-1]  # (B, C) logits
        z += biases[-1]
        z -= z.max(axis=1, keepdims=True)  # shift for stability
        picked = z[rows, y]  # (B,)
        xp.exp(z, out=z)
        total = z.sum(axis=1, keepdims=True)  # (B, 1)
        loss = xp.mean(xp.log(total[:, 0]) - picked)
        z /= total  # softmax
        z[rows, y] -= 1
        z *= 1.0 / n  # g = (softmax − onehot) / B: the fused softmax-xent gradient
        grads, g = [], z
        for i in reversed(range(len(weights))):
            grads += [g.sum(axis=0), acts[i].T @ g]  # gb, gW
            if i > 0:
                g = g @ weights[i].T  # (B, D_in)
                g *= acts[i] > 0  # through the ReLU
        self.grads = grads[::-1]
        return loss

    def step(self, x, y) -> None:
        """One training step: forward, backward and θ ← θ − lr·g in place (no host read)."""
        self.forward_backward(x, y)
        for p, g in zip(self.params, self.grads):
            g *= self.lr  # the gradient is dropped after the step: scale it in place
            p -= g


def torch_twins():
    """The PyTorch twins module, or None when PyTorch is not installed."""
    try:
        from .. import twins
    except ImportError:
        return None
    return twins


def contender(name: str, model, loss_fn, grads, update, wait=sync) -> Contender:
    """``model``'s step: backward of ``loss_fn()``, then ``update()``; and its loss and host
    gradients ``grads()`` after one backward."""

    def loss_and_grads():
        model.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss.item(), grads()

    def step():
        model.zero_grad()
        loss_fn().backward()
        update()

    return Contender(name, Timed(step, wait), loss_and_grads)


def sgd(params) -> None:
    """θ ← θ − lr·g in place, as the floor does it, g scaled in place: it is dropped next."""
    for p in params:
        p.grad *= LR
        p.data -= p.grad


def ours(model, loss_fn) -> Contender:
    """scratchpar's step of ``model`` on ``loss_fn()``, its gradients read by parameter name."""
    params = model.parameters()
    return contender("scratchpar", model, loss_fn, lambda: {
        name: to_host(p.grad) for name, p in model.named_parameters()}, lambda: sgd(params))


def fusing(work):
    """``work`` with the fused ops on for the GPU's arrays (``scratchpar/kernels``)."""
    def run():
        with kernels.using("gpu"):
            return work()
    return run


def fused(device: str, contender: Contender) -> list[Contender]:
    """On a device, ``contender`` (scratchpar's) again with the fused ops: the same step and
    model, its kernels fused; none on the CPU, where they would run the plain ops."""
    if device == "cpu":
        return []
    return [Contender("fused", Timed(fusing(contender.step.run), contender.step.sync),
                      fusing(contender.loss_and_grads))]


def captured(device: str, model, loss_fn) -> list[Contender]:
    """On CUDA, the fused step captured whole as one CUDA graph and replayed
    (``kernels/graph.py``): zeroing, forward, backward and update in one launch, where the
    host launches each kernel of the other rows. Its equivalence is read from a replay of the
    captured forward and backward, a graph of their own."""
    if device not in GRAPHS:
        return []
    names, params = zip(*model.named_parameters())

    def forward_backward():
        model.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss.data, [p.grad for p in params]

    def step():
        loss, _ = forward_backward()
        sgd(params)
        return loss

    checked, timed = Replayed(fusing(forward_backward)), Replayed(fusing(step))

    def loss_and_grads():
        checked(())  # new: run as it is; then captured and replayed
        loss, grads = checked(())
        return float(loss), dict(zip(names, map(to_host, grads)))

    return [Contender("captured", Timed(lambda: timed(()), sync), loss_and_grads)]


def pytorch(model, device: str, twin, twin_loss, host: tuple) -> list[Contender]:
    """PyTorch's ``twin(twins)`` from ``model``'s weights, on ``twin_loss(twins, net, *data)``:
    the ``host`` arrays on its device; none where PyTorch is not installed."""
    twins = torch_twins()
    if twins is None:
        return []
    net = twins.twin_of(model, twin(twins), device)
    data = [twins.torch.from_numpy(a).to(twins.device_for(device)) for a in host]
    return [contender("pytorch", net, lambda: twin_loss(twins, net, *data),
                      lambda: twins.grads_as_numpy(net),
                      lambda: twins.sgd_update(list(net.parameters()), LR), twins.sync_for(device))]


def mlp_case(device: str, seed: int = 0) -> Case:
    """MLP 784-512-512-10 on a random batch: scratchpar, the hand-written floor and PyTorch."""
    gen = np.random.default_rng(seed)
    model = nn.MLP(MLP_SIZES, gen, dtype=np.float32)
    x = gen.standard_normal((MLP_BATCH, MLP_SIZES[0])).astype(np.float32)  # (B, 784)
    y = gen.integers(0, MLP_SIZES[-1], MLP_BATCH)  # (B,)
    dx, dy = to_device(x), to_device(y)
    tx = Tensor(dx)
    layers = [m for m in model if isinstance(m, nn.Linear)]
    hand = HandMLP([m.weight.data for m in layers], [m.bias.data for m in layers], LR)
    names = [name for name, _ in model.named_parameters()]
    floor = Contender("floor", Timed(lambda: hand.step(dx, dy)), lambda: (
        float(hand.forward_backward(dx, dy)), dict(zip(names, map(to_host, hand.grads)))))

    def loss():
        return F.cross_entropy(model(tx), dy)

    mine = ours(model, loss)
    return Case("mlp", f"MLP {'-'.join(map(str, MLP_SIZES))}, batch {MLP_BATCH}",
                [mine, *fused(device, mine), *captured(device, model, loss), floor,
                 *pytorch(model, device, lambda twins: twins.TorchMLP(MLP_SIZES),
                          lambda twins, net, tx, ty: twins.F.cross_entropy(net(tx), ty), (x, y))])


def gpt_case(device: str, seed: int = 0) -> Case:
    """A tiny GPT on random token ids (id 0 is padding): scratchpar and PyTorch."""
    gen = np.random.default_rng(seed)
    model = nn.GPT(**GPT_CONFIG, gen=gen, dropout=0.0, dtype=np.float32)
    batch = gen.integers(0, GPT_CONFIG["vocab_size"], (GPT_BATCH, GPT_CONFIG["max_len"] + 1))
    on_device = to_device(batch)  # (B, T+1)
    described = ", ".join(f"{key} {value}" for key, value in GPT_CONFIG.items())

    def loss():
        return nn.lm_loss(model, on_device)

    mine = ours(model, loss)
    return Case("gpt", f"GPT {described}, batch {GPT_BATCH}",
                [mine, *fused(device, mine), *captured(device, model, loss),
                 *pytorch(model, device, lambda twins: twins.TorchGPT(**GPT_CONFIG),
                          lambda twins, net, tb: twins.lm_loss(net, tb), (batch,))])
