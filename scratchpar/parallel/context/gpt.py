"""A tensor-parallel GPT shard made context-parallel: each rank of a cp group runs the model on
its positions of every sequence, the embedding looks up those positions, and each block's
attention core is one of the three schemes. Nothing else in the model knows of cp: the norms,
the feed-forward layers and the head act on each position alone (Dubey et al. 2024, Llama 3,
§3.3.2; Liu et al. 2023, §3)."""

from __future__ import annotations

from ...comm.chunks import counts
from ...nn.layers import Dropout
from .allgather import AllGatherAttention
from .layout import Context, ContextError
from .ring import RingAttention
from .ulysses import UlyssesAttention

SCHEMES = {"ring": RingAttention, "allgather": AllGatherAttention, "ulysses": UlyssesAttention}


def context_parallel(shard, context: Context, attention: str = "ring"):
    """``shard`` (an ``nn.GPT``, or a
    :class:`~scratchpar.parallel.tensor.gpt.TensorParallelGPT` over any tp group) with
    ``attention``'s core in every block, over ``context``; returned, changed in place. Refused,
    alike on every rank, where the schemes cannot be exact: dropout (its masks are drawn over
    the whole sequence), or Ulysses with a tp rank's key/value heads that cp does not
    divide."""
    if attention not in SCHEMES:
        raise ContextError(f"--cp-attention {attention!r} is not one of {', '.join(SCHEMES)}")
    cp = context.comm.size
    if any(m.p > 0 for _, m in shard.named_modules() if isinstance(m, Dropout)):
        raise ContextError("context parallelism runs without dropout: a rank holds 1/cp of a "
                           "sequence, so it cannot draw one device's mask of the whole; set "
                           "--dropout 0")
    tp = getattr(shard, "comm", None)  # a tensor-parallel shard's group
    tp = 1 if tp is None else tp.size
    for block in shard.blocks:
        groups = counts(block.attn.kv_heads, tp)
        if attention == "ulysses" and any(g % cp for g in groups):
            raise ContextError(f"Ulysses gives each of the {cp} cp ranks an equal share of a "
                               f"tp rank's key/value heads: {block.attn.kv_heads} over tp = "
                               f"{tp} give {groups}, which do not divide by cp = {cp}")
        block.attn.core = SCHEMES[attention](context)
    shard.pipeline_layers()[0].context = context  # the embedding looks up this rank's positions
    return shard
