"""Every parameter's Adam or AdamW update in one launch (Kingma & Ba 2015, Algorithm 1;
Loshchilov & Hutter 2019, Algorithm 2), mixed precision's masters and unscaling in it
(Micikevicius et al. 2018, §3.1), where the plain update runs about ten array operations a
parameter and mixed precision two more. A block updates a chunk of one parameter; a table
says which (``apex``'s multi-tensor apply is the same idea). Each element rounds as the plain
update does, and the compiler is told not to fuse a product and a sum into one rounding
(``OPTIONS``): the same bits."""

from __future__ import annotations

import functools

import numpy as np

from .cuda import CTYPES, THREADS, function

CHUNK = 1 << 16  # elements a block updates
OPTIONS = ("--fmad=false",)  # a·b + c rounded twice, as NumPy and CuPy's own ops round it
SOURCE = r"""
// block b updates elements start[b] … of tensor k = tensor[b]: T its parameter's and gradient's
// type, W its master's and moments' (the parameter itself where it has no master)
template <typename T, typename W>
__global__ void update(const long long* params, const long long* grads, const long long* firsts,
                       const long long* seconds, const long long* masters,
                       const long long* sizes, const int* tensor, const long long* start,
                       const double* scalars, int n, int chunk, double unscale, double l2,
                       double decay, double beta1, double beta2, double eps) {
    const int k = tensor[blockIdx.x];
    T* p = (T*)params[k];
    const T* g = (const T*)grads[k];
    W* m = (W*)firsts[k];
    W* v = (W*)seconds[k];
    W* w = masters[k] ? (W*)masters[k] : (W*)params[k];
    const W rate = (W)scalars[k], root_ = (W)scalars[n + k];  // lr/(1 − β₁ᵗ), √(1 − β₂ᵗ)
    const long long end = start[blockIdx.x] + chunk < sizes[k] ? start[blockIdx.x] + chunk
                                                               : sizes[k];
    for (long long j = start[blockIdx.x] + threadIdx.x; j < end; j += THREADS) {
        W grad = (W)widen(g[j]);
        if (masters[k]) grad = grad * (W)unscale;  // ∇ = (S·∇)/S, in the masters' precision
        if (l2 != 0) grad = w[j] * (W)l2 + grad;  // Adam's L2 decay: ∇ + λθ
        W x = w[j] * (W)decay;  // AdamW's decoupled decay: θ ← (1 − lr·λ)θ
        m[j] = m[j] * (W)beta1 + grad * (W)(1.0 - beta1);  // m ← β₁m + (1 − β₁)g
        v[j] = v[j] * (W)beta2 + grad * grad * (W)(1.0 - beta2);  // v ← β₂v + (1 − β₂)g²
        const W step = root(v[j]) / root_ + (W)eps;  // √v̂ + ε
        x = x - m[j] / step * rate;  // θ ← θ − lr·m̂/(√v̂ + ε)
        w[j] = x;
        if (masters[k]) put(p + j, x);  // the parameter: its master rounded to 16 bits
    }
}
"""
TEMPLATES = (("__half", "float"), ("float", "float"), ("double", "double"))  # (T, W)
NAMES = tuple(f"update<{t}, {w}>" for t, w in TEMPLATES)


@functools.cache
def blocks(sizes: tuple[int, ...]):
    """The launch's table for tensors of ``sizes``: each block's tensor and first element, on
    the device (made once for a model's parameters)."""
    import cupy

    tensor = [k for k, size in enumerate(sizes) for _ in range(0, size, CHUNK)]
    start = [s for size in sizes for s in range(0, size, CHUNK)]
    return cupy.asarray(np.array(tensor, np.int32)), cupy.asarray(np.array(start, np.int64))


def step(params, grads, firsts, seconds, masters, rates, roots, *, unscale: float, l2: float,
         decay: float, beta1: float, beta2: float, eps: float) -> None:
    """Update the parameters (their masters where ``masters`` holds them, else None each) and
    moments in place: ``rates`` lr/(1 − β₁ᵗ) and ``roots`` √(1 − β₂ᵗ) each parameter's."""
    import cupy

    tensor, start = blocks(tuple(int(p.size) for p in params))
    table = np.array([[a.data.ptr for a in group] for group in (params, grads, firsts, seconds)]
                     + [[0 if a is None else a.data.ptr for a in masters],
                        [int(p.size) for p in params]], np.int64)
    table = cupy.asarray(table)  # (6, n): one copy to the device a step
    scalars = cupy.asarray(np.array(list(rates) + list(roots), np.float64))
    name = f"update<{CTYPES[params[0].dtype]}, {CTYPES[firsts[0].dtype]}>"
    function(SOURCE, NAMES, name, OPTIONS)(
        (len(tensor),), (THREADS,),
        (table[0], table[1], table[2], table[3], table[4], table[5], tensor, start, scalars,
         np.int32(len(params)), np.int32(CHUNK), np.float64(unscale), np.float64(l2),
         np.float64(decay), np.float64(beta1), np.float64(beta2), np.float64(eps)))

