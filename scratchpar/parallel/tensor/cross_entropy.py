"""Cross-entropy over vocabulary-split logits, the whole logits never on one rank.

Rank r of a tp group of size t holds the columns ``bounds(V, t)[r]`` of the logits (N, V) (a
vocabulary-parallel head's output). Each rank reduces its columns to numbers per row, and only
those cross the group:

    m = max_r max_j x[:, j]          one all-reduce (max) of N numbers (and the t widths)
    s = Σ_r Σ_j exp(x[:, j] − m)     ⎫ one all-reduce (sum) of 2N numbers
    z = Σ_r x[:, y] − m  (the owner) ⎭
    loss_i = log s_i − z_i

(Shoeybi et al. 2019, §3: "we fuse the output of the parallel GEMM [Y₁, Y₂] with the cross
entropy loss which reduces the dimension to b × s", instead of all-gathering b × s × v logits.)
"""

from __future__ import annotations

from ...autograd import Function, Tensor
from ...autograd.ops_nn import sum_over
from ...autograd.precision import WIDE, is_low, narrow, wide
from ...backend import get_array_module
from ...comm import collectives


def vocab_parallel_cross_entropy(logits, targets, comm, ignore_index: int = -100,
                                 reduction: str = "mean") -> Tensor:
    """logits[N,V/t] (this rank's columns), targets[N] (global ids, alike on every rank) →
    the scalar ``F.cross_entropy(logits[N,V], targets, ignore_index, reduction)``, the same on
    every rank and counted once (as after Megatron's g).

    Backward gives each rank the gradient of its own columns, with no communication."""
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    targets = targets.data if isinstance(targets, Tensor) else targets
    return VocabParallelCrossEntropy.apply(logits, targets, comm=comm, ignore_index=ignore_index,
                                           reduction=reduction)


class VocabParallelCrossEntropy(Function):
    """−log softmax(x)_y over targets ≠ ``ignore_index``, mean over them (0 targets → 0) or sum,
    with the softmax's max and sum taken across the vocabulary shards. 16-bit logits as one
    device's ``CrossEntropy`` takes them: computed and reduced in fp32, the loss in fp32, the
    softmax saved and the gradient returned in the logits' dtype."""

    @staticmethod
    def forward(ctx, logits, targets, comm, ignore_index, reduction):
        xp = get_array_module(logits)
        n, width = logits.shape
        dtype, logits = logits.dtype, wide(logits)
        row_max, start = _max_and_start(comm, logits)  # (N,), where this rank's columns start
        valid = targets != ignore_index  # (N,)
        mine = valid & (targets >= start) & (targets < start + width)  # (N,) targets owned here
        local = xp.where(mine, targets - start, 0)  # (N,) a column of this shard everywhere
        rows = xp.arange(n)
        probs = logits - row_max[:, None]  # (N, V_t) shifted by the whole row's max
        sums = xp.zeros((2, n), logits.dtype)  # [Σ exp, target logit]: one all-reduce for both
        if width:
            sums[1] = xp.where(mine, probs[rows, local], 0)  # the owner's pick, zero elsewhere
        xp.exp(probs, out=probs)
        sums[0] = sum_over(probs, -1)[:, 0]
        collectives.all_reduce_(comm, sums)  # Shoeybi et al. §3: only b × s numbers cross
        sumexp, picked = sums  # (N,), (N,)
        probs /= sumexp[:, None]  # this rank's columns of the softmax
        losses = (xp.log(sumexp) - picked) * valid  # (N,) −log softmax(x)_y, masked
        ctx.scale = 1.0
        if reduction == "mean":  # 1 / max(count, 1) where the count is: no host sync
            ctx.scale = (1.0 / xp.maximum(valid.sum(), 1)).astype(logits.dtype)
        ctx.probs, ctx.rows, ctx.local = narrow(probs, dtype), rows, local
        ctx.mine, ctx.valid = mine, valid
        return xp.asarray(losses.sum() * ctx.scale, dtype=logits.dtype)

    @staticmethod
    def backward(ctx, g):
        probs = ctx.probs  # (N, V_t), in the logits' dtype
        grad = probs.astype(WIDE) if is_low(probs.dtype) else probs.copy()  # fp32 inside
        if grad.shape[1]:  # softmax − one-hot, on this rank's columns only
            grad[ctx.rows, ctx.local] -= ctx.mine.astype(grad.dtype)
        grad *= (ctx.valid * (g * ctx.scale)).astype(grad.dtype)[:, None]
        return narrow(grad, probs.dtype), None


def _max_and_start(comm, logits):
    """Each row's max over the whole vocabulary (N,), and the first column this rank holds.

    One max all-reduce carries both: after the N row maxima, a row of t widths, zero but for
    this rank's own, so the max hands every rank every width (exact in floating point up to
    2²⁴ columns) and the start is the sum of the widths before its own. A rank without columns
    offers −∞ as its maxima."""
    xp = get_array_module(logits)
    n, width = logits.shape
    buf = xp.zeros(n + comm.size, logits.dtype)  # (N + t,): [row maxima | widths]
    buf[:n] = logits.max(axis=1) if width else -xp.inf
    buf[n + comm.rank] = width
    collectives.all_reduce_(comm, buf, op="max")
    return buf[:n], buf[n:n + comm.rank].sum().astype(xp.int64)
