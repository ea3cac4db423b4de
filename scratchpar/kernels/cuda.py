"""What the fused kernels share: a CUDA preamble (a float16 read and computed in fp32, a block's
sum and maximum) and each source compiled once, on its first launch, for the dtype it meets."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

THREADS = 256  # a block's threads, a power of two: block_sum halves them
CTYPES = {np.dtype(np.float16): "__half", np.dtype(np.float32): "float",
          np.dtype(np.float64): "double"}

PREAMBLE = r"""
#include <cuda_fp16.h>
#ifndef THREADS
#define THREADS 256
#endif

// what a T computes in: fp32 for float16 and float32 (Micikevicius et al. 2018, section 3.3:
// sums of 16-bit values carried in fp32), double for double
template <typename T> struct Acc { typedef float type; };
template <> struct Acc<double> { typedef double type; };

__device__ __forceinline__ float widen(__half x) { return __half2float(x); }
__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ double widen(double x) { return x; }
__device__ __forceinline__ void put(__half* p, float x) { *p = __float2half(x); }
__device__ __forceinline__ void put(float* p, float x) { *p = x; }
__device__ __forceinline__ void put(double* p, double x) { *p = x; }
__device__ __forceinline__ float exponential(float x) { return expf(x); }
__device__ __forceinline__ double exponential(double x) { return exp(x); }
__device__ __forceinline__ float logarithm(float x) { return logf(x); }
__device__ __forceinline__ double logarithm(double x) { return log(x); }
__device__ __forceinline__ float root(float x) { return sqrtf(x); }
__device__ __forceinline__ double root(double x) { return sqrt(x); }
__device__ __forceinline__ float lowest(float) { return __int_as_float((int)0xff800000); }
__device__ __forceinline__ double lowest(double) {
    return __longlong_as_double(0xfff0000000000000ULL);
}
__device__ __forceinline__ float not_a_number(float) { return __int_as_float(0x7fc00000); }
__device__ __forceinline__ double not_a_number(double) {
    return __longlong_as_double(0x7ff8000000000000ULL);
}

// the sum of v over the block's threads, given to every thread (a tree: log2 THREADS halvings)
template <typename A>
__device__ A block_sum(A v, A* scratch) {
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) scratch[threadIdx.x] += scratch[threadIdx.x + s];
        __syncthreads();
    }
    const A total = scratch[0];
    __syncthreads();  // every thread has read it before scratch is written again
    return total;
}

// the largest v over the block's threads, given to every thread
template <typename A>
__device__ A block_max(A v, A* scratch) {
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s && scratch[threadIdx.x + s] > scratch[threadIdx.x])
            scratch[threadIdx.x] = scratch[threadIdx.x + s];
        __syncthreads();
    }
    const A top = scratch[0];
    __syncthreads();
    return top;
}
"""


@functools.cache
def _module(source: str, names: tuple[str, ...], options: tuple[str, ...]):
    import cupy

    return cupy.RawModule(code=PREAMBLE + source, name_expressions=names, options=options)


def function(source: str, names: tuple[str, ...], name: str, options: tuple[str, ...] = ()):
    """The kernel ``name`` (one of ``names``, each a template's instance) of ``source``,
    compiled with every one of them, and the compiler's ``options``, at its first launch."""
    return _module(source, names, options).get_function(name)


def kernel(source: str, templates: tuple[str, ...], name: str, dtype):
    """The kernel ``name`` of ``source`` (one of its ``templates``) for arrays of ``dtype``."""
    names = tuple(f"{t}<{c}>" for t in templates for c in CTYPES.values())
    return function(source, names, f"{name}<{CTYPES[np.dtype(dtype)]}>")


def accumulator(dtype):
    """The NumPy type a kernel of ``dtype`` computes in (its scalars' type): ``Acc`` above."""
    return np.float64 if np.dtype(dtype) == np.float64 else np.float32


def rows(n: int) -> tuple[tuple[int], tuple[int]]:
    """A launch of a block of THREADS for each of ``n`` rows: (grid, block)."""
    return (n,), (THREADS,)


# The elementwise kernels' preamble (cupy.ElementwiseKernel, whose T for float16 is CuPy's own
# float16, converted to and from float): what a T computes in, and e^x of it
POINTWISE = r"""
template <typename T> struct Wide { typedef float type; };
template <> struct Wide<double> { typedef double type; };
__device__ __forceinline__ float exponential(float x) { return expf(x); }
__device__ __forceinline__ double exponential(double x) { return exp(x); }
"""


@dataclass(frozen=True)
class Pointwise:
    """An elementwise kernel: its ``inputs`` and ``outputs`` as CuPy declares them ("T a,
    float64 scale") and its ``body`` (CuPy's ``i`` its element's index)."""

    inputs: str
    outputs: str
    body: str
    name: str

    def __call__(self, *args):
        return _elementwise(self)(*args)


@functools.cache
def _elementwise(kernel: Pointwise):
    import cupy

    return cupy.ElementwiseKernel(kernel.inputs, kernel.outputs, kernel.body, kernel.name,
                                  preamble=POINTWISE)
