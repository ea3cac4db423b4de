"""Compute precisions (fp32, fp16, bf16) on each array backend, and the product tensor cores form.

Mixed precision (Micikevicius et al. 2018) runs forward and backward in a 16-bit float and keeps
fp32 where rounding would hurt. Two 16-bit formats are in use: IEEE half (fp16: 5 exponent bits,
10 mantissa bits, largest 65,504, so gradients need loss scaling) and bfloat16 (bf16: fp32's 8
exponent bits, 7 mantissa bits, no scaling needed). CuPy has float16 only; NumPy has float16,
and bfloat16 through the ``ml_dtypes`` package.
"""

from __future__ import annotations

import numpy as np

NAMES = ("fp32", "fp16", "bf16")
WIDE = np.dtype(np.float32)  # what a low-precision product accumulates in, and the masters' dtype


class PrecisionError(ValueError):
    """A precision that this array backend cannot compute in."""


def bfloat16() -> np.dtype:
    """NumPy's bfloat16, from ``ml_dtypes`` (the dtype JAX and TensorFlow register)."""
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


def dtype_of(name: str, xp) -> np.dtype:
    """The dtype that ``name`` computes in on ``xp``'s arrays; a clear error where ``xp`` has
    none (CuPy, and the device double that follows CuPy's rules, have no bfloat16)."""
    if name not in NAMES:
        raise PrecisionError(f"precision must be one of {', '.join(NAMES)}; got {name!r}")
    if name == "fp32":
        return WIDE
    if name == "fp16":
        return np.dtype(np.float16)
    if xp is not np:
        raise PrecisionError(
            f"bf16 needs an array backend with bfloat16; {xp.__name__} has none (CuPy "
            "computes float16 only): use --precision fp16, or --device cpu")
    return bfloat16()


def is_low(dtype) -> bool:
    """Whether ``dtype`` is a 16-bit float (fp16 or bf16; ml_dtypes' bfloat16 is not a NumPy
    floating subtype, so it is named)."""
    dtype = np.dtype(dtype)
    return dtype.itemsize == 2 and (dtype.kind == "f" or dtype.name == "bfloat16")


def wide(x):
    """``x`` in fp32 if it is a 16-bit float, else itself: numerically sensitive ops
    (softmax, layer norm, the losses, reductions) compute inside in fp32."""
    return x.astype(WIDE) if is_low(x.dtype) else x


def product(a, b):
    """``a @ b``. On NumPy, 16-bit inputs are multiplied by BLAS in fp32 and the result rounded
    to their dtype, as tensor cores accumulate fp16 products in fp32 (NumPy's own float16
    product is an element loop, about 300× slower than fp32 here); CuPy's float16 product runs
    on cuBLAS, which accumulates in fp32 too."""
    if type(a) is np.ndarray and is_low(a.dtype):
        return np.matmul(a, b, dtype=WIDE).astype(a.dtype)
    return a @ b
