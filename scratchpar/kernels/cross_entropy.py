"""Softmax cross-entropy as one kernel each way: a row's softmax and its −log p of the target
in one block (``autograd/ops_nn.py: CrossEntropy`` is the same equations in plain ops, about a
dozen array operations forward); backward's p − onehot(y), scaled, in one pass."""

from __future__ import annotations

import numpy as np

from .cuda import accumulator, kernel, rows

SOURCE = r"""
// a row of v logits x and its target y: p = softmax(x), kept for backward, and the row's loss
// log Σ e^(x − max x) − (x_y − max x), or 0 where y is ignored; a y outside [0, v) gives NaN
template <typename T>
__global__ void forward(const T* x, const long long* targets, long long ignore, T* probs,
                        typename Acc<T>::type* losses, int v) {
    typedef typename Acc<T>::type A;
    __shared__ A scratch[THREADS];
    const long long at = (long long)blockIdx.x * v;
    A top = lowest(A(0));
    for (int j = threadIdx.x; j < v; j += THREADS)
        if (widen(x[at + j]) > top) top = widen(x[at + j]);
    top = block_max(top, scratch);
    A sum = 0;
    for (int j = threadIdx.x; j < v; j += THREADS) sum += exponential(widen(x[at + j]) - top);
    sum = block_sum(sum, scratch);
    for (int j = threadIdx.x; j < v; j += THREADS)
        put(probs + at + j, exponential(widen(x[at + j]) - top) / sum);
    if (threadIdx.x == 0) {
        const long long y = targets[blockIdx.x];
        if (y == ignore) losses[blockIdx.x] = 0;
        else if (y < 0 || y >= v) losses[blockIdx.x] = not_a_number(A(0));  // no such class
        else losses[blockIdx.x] = logarithm(sum) - (widen(x[at + y]) - top);
    }
}

// dx = (p − onehot(y))·c, c = ∂L/∂loss times the reduction's scale (a device scalar), or 0
// where y is ignored
template <typename T>
__global__ void backward(const T* probs, const long long* targets, long long ignore,
                         const typename Acc<T>::type* scale, T* gx, int v) {
    typedef typename Acc<T>::type A;
    const long long at = (long long)blockIdx.x * v, y = targets[blockIdx.x];
    const A c = y == ignore ? A(0) : *scale;
    for (int j = threadIdx.x; j < v; j += THREADS)
        put(gx + at + j, (widen(probs[at + j]) - (j == y ? A(1) : A(0))) * c);
}
"""
TEMPLATES = ("forward", "backward")


def forward(logits, targets, ignore_index: int):
    """logits (N, V), targets (N,) int64 → (softmax like logits, each row's loss (N,) in the
    accumulator's dtype)."""
    import cupy

    n, v = logits.shape
    probs = cupy.empty_like(logits)
    losses = cupy.empty(n, accumulator(logits.dtype))
    kernel(SOURCE, TEMPLATES, "forward", logits.dtype)(
        *rows(n), (logits, targets, np.int64(ignore_index), probs, losses, np.int32(v)))
    return probs, losses


def backward(probs, targets, ignore_index: int, scale):
    """forward's softmax (N, V) and ``scale``, a 0-d device array of the accumulator's dtype
    (∂L/∂loss times the reduction's 1/count) → ∂L/∂logits, like probs."""
    import cupy

    n, v = probs.shape
    gx = cupy.empty_like(probs)
    kernel(SOURCE, TEMPLATES, "backward", probs.dtype)(
        *rows(n), (probs, targets, np.int64(ignore_index), scale, gx, np.int32(v)))
    return gx
