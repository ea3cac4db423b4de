"""PyTorch twins of scratchpar's MLP and GPT (step and dp benchmarks), loaded with its weights."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..backend import to_host
from .timing import on_host


def device_for(device: str) -> torch.device:
    """Where the twin of a model on scratchpar's ``device`` runs: the GPU with ``cuda``, else the
    CPU (the double is scratchpar's stand-in for a GPU, and PyTorch has none). A GPU run needs
    PyTorch's CUDA build, since the comparison it exists for is against CUDA eager."""
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"--device cuda: torch {torch.__version__} sees no GPU (a CPU-only "
                           "build?): install a CUDA build of torch, or uninstall it to skip "
                           "the PyTorch rows")
    return torch.device("cuda" if device == "cuda" else "cpu")


def sync_for(device: str):
    """The wait that ends a timed PyTorch step: its CUDA kernels are asynchronous too."""
    return torch.cuda.synchronize if device == "cuda" else on_host


class TorchMLP(nn.Sequential):
    """(B, sizes[0]) → (B, sizes[-1]): Linear–ReLU stacks, parameters named as in ``nn.MLP``."""

    def __init__(self, sizes: list[int]):
        layers = []
        for d_in, d_out in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(d_in, d_out), nn.ReLU()]
        super().__init__(*layers[:-1])


class TorchAttention(nn.Module):
    """(B, T, C) → (B, T, C): fused qkv, QKᵀ/√d, causal mask, softmax, ·V, then proj."""

    def __init__(self, d_model: int, n_heads: int, max_len: int):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.register_buffer("mask", torch.ones(max_len, max_len, dtype=torch.bool).triu(1))

    def forward(self, x):
        b, t, c = x.shape
        h, d = self.n_heads, c // self.n_heads
        q, k, v = self.qkv(x).view(b, t, 3, h, d).permute(2, 0, 3, 1, 4)  # (B, H, T, d) each
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))  # (B, H, T, T)
        attn = scores.masked_fill(self.mask[:t, :t], float("-inf")).softmax(dim=-1)
        return self.proj((attn @ v).permute(0, 2, 1, 3).reshape(b, t, c))


class TorchBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int, max_len: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = TorchAttention(d_model, n_heads, max_len)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TorchGPT(nn.Module):
    """ids (B, T) → logits (B, T, V), parameters named as in ``nn.GPT`` (dropout 0)."""

    def __init__(self, vocab_size: int, max_len: int, d_model: int, n_heads: int, n_layers: int):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList([TorchBlock(d_model, n_heads, max_len)
                                     for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, ids):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def lm_loss(model: TorchGPT, batch):
    """Next-token cross-entropy on B (b, n+1), pad id 0 ignored, as ``scratchpar.nn.lm_loss``."""
    logits = model(batch[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1),
                           ignore_index=0)


def sgd_update(params, lr: float) -> None:
    """θ ← θ − lr·g in place, in PyTorch's fused form."""
    with torch.no_grad():
        for p in params:
            p.add_(p.grad, alpha=-lr)


def _linear_weights(model: nn.Module) -> set[str]:
    return {f"{name}.weight" for name, m in model.named_modules() if isinstance(m, nn.Linear)}


def twin_of(source, twin: nn.Module, device: str) -> nn.Module:
    """``twin`` on the device the twins of scratchpar's ``device`` use, with the parameters of
    the scratchpar module ``source`` (Linear weights transposed)."""
    model, linear = twin.to(device_for(device)), _linear_weights(twin)
    ours, theirs = dict(model.named_parameters()), dict(source.named_parameters())
    if ours.keys() != theirs.keys():
        raise ValueError(f"parameter names differ: {sorted(ours.keys() ^ theirs.keys())}")
    with torch.no_grad():
        for name, p in ours.items():
            w = torch.from_numpy(np.array(to_host(theirs[name].data)))
            p.copy_(w.T if name in linear else w)
    return model


def grads_as_numpy(model: nn.Module) -> dict[str, np.ndarray]:
    """Name → gradient on the host, in scratchpar's layout (Linear weights transposed back to
    (in, out))."""
    linear = _linear_weights(model)
    return {name: (p.grad.T if name in linear else p.grad).cpu().numpy()
            for name, p in model.named_parameters()}
