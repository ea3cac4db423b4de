"""The compute precisions: their dtypes per backend, the errors where one is missing, and the
16-bit product accumulated in fp32."""

import numpy as np
import pytest

from scratchpar import double
from scratchpar.autograd.precision import (
    PrecisionError,
    bfloat16,
    dtype_of,
    is_low,
    product,
    wide,
)


def test_each_name_gives_its_dtype_on_numpy():
    assert dtype_of("fp32", np) == np.float32
    assert dtype_of("fp16", np) == np.float16
    assert dtype_of("bf16", np) == bfloat16() and bfloat16().itemsize == 2


def test_bf16_is_refused_by_name_where_the_backend_has_none():
    with pytest.raises(PrecisionError, match="bf16 needs an array backend with bfloat16"):
        dtype_of("bf16", double)
    assert dtype_of("fp16", double) == np.float16


def test_an_unknown_precision_names_the_choices():
    with pytest.raises(PrecisionError, match="fp32, fp16, bf16; got 'fp8'"):
        dtype_of("fp8", np)


@pytest.mark.parametrize("dtype", [np.float16, bfloat16()], ids=["fp16", "bf16"])
def test_low_dtypes_are_low_and_widen_to_fp32(dtype):
    x = np.arange(6, dtype=dtype)
    assert is_low(dtype) and wide(x).dtype == np.float32
    assert not is_low(np.float32) and not is_low(np.float64) and not is_low(np.int16)
    y = np.ones(3, np.float64)
    assert wide(y) is y


@pytest.mark.parametrize("dtype", [np.float16, bfloat16()], ids=["fp16", "bf16"])
def test_the_product_is_the_exact_one_rounded_once(dtype):
    """Inputs in 16 bits, the sum of 512 products in fp32, one rounding at the end: the result
    is within half an ulp of the 16-bit format (plus fp32's error) of the float64 product, which
    a sum rounded to 16 bits at each step would not be."""
    gen = np.random.default_rng(3)
    a = gen.normal(size=(16, 512)).astype(dtype)
    b = gen.normal(size=(512, 8)).astype(dtype)
    out = product(a, b)
    exact = a.astype(np.float64) @ b.astype(np.float64)  # (16, 8)
    assert out.dtype == dtype
    mantissa = 10 if dtype == np.float16 else 7  # bits after the point: 23 in fp32
    ulp = np.spacing(np.abs(exact).astype(np.float32)) * 2.0 ** (23 - mantissa)
    assert np.all(np.abs(out.astype(np.float64) - exact) <= 0.5 * ulp + 1e-4 * np.abs(exact))


def test_the_product_of_wide_arrays_is_plain_matmul():
    a = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(product(a, a.T), a @ a.T)
