"""Dropout as one kernel forward (Srivastava et al. 2014, inverted): each entry's SplitMix64
draw (``device_rng.py``: Steele, Lea & Flood 2014), its test against p and the scaled product
in one pass, where the plain ops hash in eight array operations and multiply in two more. The
same stream position gives the same mask, bit for bit."""

from __future__ import annotations

import math

import numpy as np

from ..device_rng import GAMMA, LIMIT, MIX1, MIX2
from .cuda import Pointwise

FORWARD = Pointwise("T x, uint64 key, uint64 start, uint64 origin, uint64 threshold, "
                    "float64 scale", "T out, bool keep", f"""
typedef typename Wide<T>::type A;
unsigned long long z = ((unsigned long long)i + start + origin) * {int(GAMMA)}ULL + key;
z ^= z >> 30;
z *= {int(MIX1)}ULL;
z ^= z >> 27;
z *= {int(MIX2)}ULL;
z ^= z >> 31;
keep = (z >> 11) >= threshold;
out = (T)(keep ? (A)x * (A)scale : A(0));
""", "scratchpar_dropout_forward")
BACKWARD = Pointwise("T g, bool keep, float64 scale", "T grad", """
typedef typename Wide<T>::type A;
grad = (T)(keep ? (A)g * (A)scale : A(0));
""", "scratchpar_dropout_backward")


def forward(x, generator, p: float):
    """x → (x·keep/(1 − p), keep), keep drawn as ``generator.keep(x.shape, p)`` draws it; the
    stream moves past it alike. Its origin, where it has one, is read from device memory."""
    start = np.uint64((generator.position + 1) % LIMIT)
    origin = np.uint64(0) if generator.origin is None else generator.origin
    threshold = np.uint64(math.ceil(p * 2 ** 53))
    out, keep = FORWARD(x, np.uint64(generator.key), start, origin, threshold, 1.0 / (1.0 - p))
    generator.position += x.size
    return out, keep


def backward(g, keep, p: float):
    """∂L/∂out g and forward's mask → ∂L/∂x."""
    return BACKWARD(g, keep, 1.0 / (1.0 - p))
