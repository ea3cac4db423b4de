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
    floating subtype, so it is named). A dtype is read as it is: the fp32 path asks this of
    every array an op touches."""
    try:
        kind = dtype.kind
    except AttributeError:  # a scalar type (np.float16) or a name, not yet a dtype
        return is_low(np.dtype(dtype))
    return dtype.itemsize == 2 and (kind == "f" or dtype.name == "bfloat16")


def widened(dtype):
    """fp32 for a 16-bit ``dtype``, else ``dtype`` itself: what its masters are kept and moved
    in (a parameter server's ranges, Hogwild's shared θ)."""
    return WIDE if is_low(dtype) else dtype


def wide(x):
    """``x`` in fp32 if it is a 16-bit float, else itself: numerically sensitive ops
    (softmax, layer norm, the losses, reductions) compute inside in fp32."""
    return x.astype(WIDE) if is_low(x.dtype) else x


def narrow(x, dtype):
    """``x`` rounded to ``dtype`` if that is a 16-bit float, else ``x`` itself: what an op
    computed in fp32 inside returns, and what it saves for backward at half the bytes."""
    return x.astype(dtype, copy=False) if is_low(dtype) else x


def total(x, axis=None, keepdims: bool = False):
    """Σ ``x`` over ``axis``, added in fp32 if ``x`` is 16-bit and returned in its dtype.

    NumPy adds float16 rows in float16, and bfloat16 always in bfloat16: a sum of 8,192
    values near 0.5 stalls at 2,048 in fp16 and at 256 in bf16, where each next term is below
    half an ulp. The widening happens in the reduction's own buffers, with no fp32 copy."""
    if is_low(x.dtype):
        return x.sum(axis=axis, keepdims=keepdims, dtype=WIDE).astype(x.dtype)
    return x.sum(axis=axis, keepdims=keepdims)


def weak(a, b):
    """``a`` and ``b``, a Python float among them made a scalar of the other's 16-bit dtype.

    NumPy 2 keeps an array's dtype against a Python float (NEP 50's weak scalars), but
    ml_dtypes' bfloat16 is left out of that rule: bf16 · 0.5 is fp32. A constant then takes the
    array's dtype, as it does in fp16, fp32 and float64; anything else is returned as given."""
    if type(b) is float and is_low(getattr(a, "dtype", WIDE)):
        return a, a.dtype.type(b)
    if type(a) is float and is_low(getattr(b, "dtype", WIDE)):
        return b.dtype.type(a), b
    return a, b


def saturated(value: float, dtype):
    """``value`` as a scalar of ``dtype``; in 16 bits a finite value beyond the format's range
    becomes its largest finite one, not ±inf: a mask's fill of −1e9 stays a large negative in
    fp16 (largest 65,504), so that a row masked whole is uniform in softmax, not NaN."""
    dtype = np.dtype(dtype)
    if is_low(dtype) and np.isfinite(value):
        import ml_dtypes  # its finfo knows bfloat16, and float16 as NumPy's does

        largest = float(ml_dtypes.finfo(dtype).max)
        value = min(max(value, -largest), largest)
    return dtype.type(value)


def accumulated(a, b):
    """``a @ b`` as a 16-bit product accumulates it, before its rounding: on NumPy, 16-bit inputs
    are multiplied by BLAS in fp32 and the result left in fp32 (a layer adds its bias there
    and rounds once); elsewhere the native product (cuBLAS rounds its fp32 sums itself)."""
    if type(a) is np.ndarray and is_low(a.dtype):
        return wide(a) @ wide(b)  # fp32 copies in the operands' layouts (for a transposed bf16
        # operand, np.matmul(…, dtype=fp32) converts it twice as slowly)
    return a @ b


def product(a, b):
    """``a @ b``. On NumPy, 16-bit inputs are multiplied by BLAS in fp32 and the result rounded
    to their dtype, as tensor cores accumulate fp16 products in fp32 (NumPy's own float16
    product is an element loop, about 300× slower than fp32 here); CuPy's float16 product runs
    on cuBLAS, which accumulates in fp32 too."""
    return narrow(accumulated(a, b), a.dtype)
