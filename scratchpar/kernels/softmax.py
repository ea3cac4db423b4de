"""Attention's weights as one kernel each way: softmax(s·x, the hidden entries at −∞) along the
last axis (Vaswani et al. 2017, eq. 1), where the plain ops scale, mask and normalize in three
passes over the (B, H, Tq, Tk) scores (``autograd/ops_fused.py: ScaledMaskedSoftmax``)."""

from __future__ import annotations

import numpy as np

from .cuda import accumulator, kernel, rows

SOURCE = r"""
// a row of n scores: y = e^(v − max v) / Σ e^(v − max v), v = s·x, or −∞ where hidden; hidden is
// (tq, n), the row's query at (row mod tq), read where masked is 1
template <typename T>
__global__ void forward(const T* x, const bool* hidden, int masked, T* y, int n, int tq,
                        typename Acc<T>::type scale) {
    typedef typename Acc<T>::type A;
    __shared__ A scratch[THREADS];
    const long long at = (long long)blockIdx.x * n;
    const bool* mask = masked ? hidden + (long long)(blockIdx.x % tq) * n : 0;
    A top = lowest(A(0));
    for (int j = threadIdx.x; j < n; j += THREADS) {
        const A v = (mask && mask[j]) ? lowest(A(0)) : widen(x[at + j]) * scale;
        if (v > top) top = v;
    }
    top = block_max(top, scratch);
    A sum = 0;
    for (int j = threadIdx.x; j < n; j += THREADS) {
        const A v = (mask && mask[j]) ? lowest(A(0)) : widen(x[at + j]) * scale;
        sum += exponential(v - top);
    }
    sum = block_sum(sum, scratch);
    for (int j = threadIdx.x; j < n; j += THREADS) {
        const A v = (mask && mask[j]) ? lowest(A(0)) : widen(x[at + j]) * scale;
        put(y + at + j, exponential(v - top) / sum);
    }
}

// dx = s·y ⊙ (g − Σ g ⊙ y): softmax's backward, then the scale's; a hidden entry's y is 0
template <typename T>
__global__ void backward(const T* g, const T* y, T* gx, int n, typename Acc<T>::type scale) {
    typedef typename Acc<T>::type A;
    __shared__ A scratch[THREADS];
    const long long at = (long long)blockIdx.x * n;
    A dot = 0;
    for (int j = threadIdx.x; j < n; j += THREADS) dot += widen(g[at + j]) * widen(y[at + j]);
    dot = block_sum(dot, scratch);
    for (int j = threadIdx.x; j < n; j += THREADS)
        put(gx + at + j, (widen(g[at + j]) - dot) * widen(y[at + j]) * scale);
}
"""
TEMPLATES = ("forward", "backward")


def forward(x, scale: float, hidden=None):
    """x (..., Tq, Tk) → its weights, like x; ``hidden`` (Tq, Tk) bool, True at −∞, or None."""
    import cupy

    n, tq = x.shape[-1], x.shape[-2]
    y = cupy.empty_like(x)
    mask = cupy.zeros(1, bool) if hidden is None else cupy.ascontiguousarray(hidden)
    kernel(SOURCE, TEMPLATES, "forward", x.dtype)(
        *rows(x.size // n), (x, mask, np.int32(hidden is not None), y, np.int32(n),
                             np.int32(tq), accumulator(x.dtype)(scale)))
    return y


def backward(g, y, scale: float):
    """∂L/∂y g and the weights y (..., Tk) → ∂L/∂x, like g."""
    import cupy

    n = g.shape[-1]
    gx = cupy.empty_like(g)
    kernel(SOURCE, TEMPLATES, "backward", g.dtype)(
        *rows(g.size // n), (g, y, gx, np.int32(n), accumulator(g.dtype)(scale)))
    return gx
