"""The pre-norm transformer block split across a tp group, with or without sequence parallelism."""

from __future__ import annotations

from ...nn.layers import LayerNorm
from ...nn.module import Module, Sequential
from ...nn.moe import MixtureOfExperts
from .attention import ParallelAttention, SequenceParallelAttention
from .feed_forward import ParallelFeedForward, SequenceParallelFeedForward
from .layout import PARTIAL


class SequenceParallelLayerNorm(LayerNorm):
    """(B, T/t, C) → (B, T/t, C): each rank normalizes its own tokens. γ and β are replicated,
    and each rank's gradient is the part from its tokens (Korthikanti et al. 2022, §4.2.2)."""

    tp_layouts = {"weight": PARTIAL, "bias": PARTIAL}


def copy_norm(norm, cls):
    """A ``cls`` LayerNorm with copies of ``norm``'s γ and β (nothing shared with it)."""
    out = cls(norm.weight.shape[0], norm.weight.dtype, norm.eps)
    out.load_state_dict(norm.state_dict())
    return out


class ParallelBlock(Module):
    """X[B,T,C] → X + attn(LN(X)), then + MLP(LN(·)) → Y[B,T,C], input and output replicated.

    Megatron §3, Fig. 3: the LayerNorms and residuals run alike on every rank (replicated γ, β
    with whole gradients). The attention splits by heads and the MLP by its hidden units. Two
    all-reduces forward (g after the attention's projection and after the MLP's W₂) and two
    backward (f before QKV and before W₁). Built from ``nn.Block``, whose names it keeps. A
    sparse block's mixture of experts is not split: every rank of the group routes its
    (replicated) tokens alike, through its own copy (:mod:`scratchpar.parallel.experts` splits
    the experts over ranks of other replicas instead)."""

    norm_class, attn_class, mlp_class = LayerNorm, ParallelAttention, ParallelFeedForward

    def __init__(self, block, comm):
        self.ln1 = copy_norm(block.ln1, self.norm_class)
        self.attn = self.attn_class(block.attn, comm)
        self.ln2 = copy_norm(block.ln2, self.norm_class)
        sparse = isinstance(block.mlp[0], MixtureOfExperts)
        self.mlp = (Sequential(block.mlp[0].replica(), ParallelFeedForward.dropout(
            block.mlp[-1].p, comm)) if sparse else self.mlp_class(block.mlp, comm))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))  # (B, T, C), or (B, T/t, C) sequence shards
        return x + self.mlp(self.ln2(x))


class SequenceParallelBlock(ParallelBlock):
    """X[B,T/t,C] → Y[B,T/t,C], sequence shards ``chunks.bounds(T, t)`` in and out.

    Korthikanti et al. 2022, §4.2.2: the LayerNorms, the residuals and the MLP's dropout act on
    this rank's tokens. An all-gather along T (g) replaces f before QKV and before W₁, and a
    reduce-scatter along T (ḡ) replaces g after the projection and after W₂. The same bytes as
    two all-reduces, but the activations outside attention and MLP are kept 1/t each. Two
    all-gathers and two reduce-scatters forward, and two of each backward. γ, β and the biases
    added after a reduce-scatter get partial gradients (``PARTIAL``)."""

    norm_class = SequenceParallelLayerNorm
    attn_class, mlp_class = SequenceParallelAttention, SequenceParallelFeedForward
