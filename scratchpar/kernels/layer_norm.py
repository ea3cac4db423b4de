"""Layer norm as one kernel each way (Ba, Kiros & Hinton 2016, eq. 4): a block of threads a row,
its mean and variance summed in fp32 (``autograd/ops_nn.py: LayerNorm`` is the same equations
in plain ops)."""

from __future__ import annotations

import numpy as np

from .cuda import THREADS, accumulator, kernel, rows

COLUMNS = 32  # columns of dγ and dβ a backward block sums: a warp's width

SOURCE = r"""
#ifndef COLUMNS
#define COLUMNS 32
#endif

// x (rows, d) → out = x̂ ⊙ γ + β, x̂ = (x − μ)·r with μ the row's mean, r = 1/√(σ² + ε) and σ²
// its variance about μ (two passes, as the plain op's); x̂ and r kept for backward
template <typename T>
__global__ void forward(const T* x, const T* gamma, const T* beta, T* out, T* xhat,
                        typename Acc<T>::type* rstd, int d, typename Acc<T>::type eps) {
    typedef typename Acc<T>::type A;
    __shared__ A scratch[THREADS];
    const long long at = (long long)blockIdx.x * d;
    A sum = 0;
    for (int j = threadIdx.x; j < d; j += THREADS) sum += widen(x[at + j]);
    const A mean = block_sum(sum, scratch) / d;
    A squares = 0;
    for (int j = threadIdx.x; j < d; j += THREADS) {
        const A c = widen(x[at + j]) - mean;
        squares += c * c;
    }
    const A r = A(1) / root(block_sum(squares, scratch) / d + eps);
    for (int j = threadIdx.x; j < d; j += THREADS) {
        const A h = (widen(x[at + j]) - mean) * r;
        put(xhat + at + j, h);
        put(out + at + j, h * widen(gamma[j]) + widen(beta[j]));
    }
    if (threadIdx.x == 0) rstd[blockIdx.x] = r;
}

// blocks 0 … n − 1: a row's dx = r·(ĝ − mean ĝ − x̂·mean(ĝ ⊙ x̂)), ĝ = g ⊙ γ. The blocks
// after them: COLUMNS columns each, dγ = Σ g ⊙ x̂ and dβ = Σ g over the rows, the rows dealt
// among THREADS / COLUMNS groups of threads (a warp reads a row's COLUMNS neighbours at once);
// each group sums its rows in order and the groups are added in order, so a run repeats bit
// for bit
template <typename T>
__global__ void backward(const T* g, const T* xhat, const typename Acc<T>::type* rstd,
                         const T* gamma, T* gx, T* ggamma, T* gbeta, int n, int d) {
    typedef typename Acc<T>::type A;
    __shared__ A scratch[THREADS];
    if (blockIdx.x < n) {
        const long long at = (long long)blockIdx.x * d;
        A sum = 0, dot = 0;
        for (int j = threadIdx.x; j < d; j += THREADS) {
            const A gh = widen(g[at + j]) * widen(gamma[j]);
            sum += gh;
            dot += gh * widen(xhat[at + j]);
        }
        const A mean = block_sum(sum, scratch) / d;
        const A mean_dot = block_sum(dot, scratch) / d;
        const A r = rstd[blockIdx.x];
        for (int j = threadIdx.x; j < d; j += THREADS) {
            const A gh = widen(g[at + j]) * widen(gamma[j]);
            put(gx + at + j, (gh - mean - widen(xhat[at + j]) * mean_dot) * r);
        }
        return;
    }
    __shared__ A parts[THREADS];
    const int column = threadIdx.x % COLUMNS, group = threadIdx.x / COLUMNS;
    const int groups = THREADS / COLUMNS, j = (blockIdx.x - n) * COLUMNS + column;
    A dg = 0, db = 0;
    if (j < d) {
        for (long long r = group; r < n; r += groups) {
            const A gv = widen(g[r * d + j]);
            dg += gv * widen(xhat[r * d + j]);
            db += gv;
        }
    }
    scratch[threadIdx.x] = dg;
    parts[threadIdx.x] = db;
    __syncthreads();
    if (group == 0 && j < d) {
        for (int k = 1; k < groups; ++k) {
            dg += scratch[k * COLUMNS + column];
            db += parts[k * COLUMNS + column];
        }
        put(ggamma + j, dg);
        put(gbeta + j, db);
    }
}
"""
TEMPLATES = ("forward", "backward")


def forward(x, gamma, beta, eps: float):
    """x (..., D), γ and β (D,) of x's dtype → (out, x̂, r): out and x̂ like x, r (N,) in the
    accumulator's dtype, N the rows."""
    import cupy

    d = x.shape[-1]
    n = x.size // d
    out, xhat = cupy.empty_like(x), cupy.empty_like(x)
    rstd = cupy.empty(n, accumulator(x.dtype))
    kernel(SOURCE, TEMPLATES, "forward", x.dtype)(
        *rows(n), (x, gamma, beta, out, xhat, rstd, np.int32(d), accumulator(x.dtype)(eps)))
    return out, xhat, rstd


def backward(g, xhat, rstd, gamma):
    """∂L/∂out g (..., D) → (dx like g, dγ (D,), dβ (D,)), given forward's x̂ and r."""
    import cupy

    d = g.shape[-1]
    n = g.size // d
    gx, ggamma, gbeta = cupy.empty_like(g), cupy.empty_like(gamma), cupy.empty_like(gamma)
    columns = -(-d // COLUMNS)
    kernel(SOURCE, TEMPLATES, "backward", g.dtype)(
        (n + columns,), (THREADS,),
        (g, xhat, rstd, gamma, gx, ggamma, gbeta, np.int32(n), np.int32(d)))
    return gx, ggamma, gbeta
