"""The buckets a description prices: never fewer than the engine packs (``comm/buckets.py``),
and near ⌈sΨ/b⌉ where every array is small beside a bucket (Li et al. 2020, §3.2)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchpar.comm.buckets import Buckets
from scratchpar.parallel.description import Shape, bucketed


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(0, 3000), min_size=1, max_size=40),
       dtype=st.sampled_from([np.float16, np.float32, np.float64]),
       bucket_bytes=st.integers(1, 1 << 15))
def test_the_count_bounds_the_engines_packing(sizes, dtype, bucket_bytes):
    arrays = [np.empty(n, dtype) for n in sizes]
    s, psi = np.dtype(dtype).itemsize, sum(sizes)
    shape = Shape(psi, s, 2, max(sizes), len(sizes))
    message = bucketed(shape, bucket_bytes, "all-reduce", "dp")
    packed = len(Buckets(arrays, bucket_bytes))
    assert packed <= message.count <= max(1, min(len(sizes), 2 * -(-s * psi // bucket_bytes)))
    assert message.count * message.nbytes >= s * psi


def test_small_arrays_are_priced_near_the_expected_count():
    """A thousand arrays of 1 KiB in buckets of 64 KiB: the engine packs 16 and ⌈sΨ/(b − sL)⌉
    says 16, where 2⌈sΨ/b⌉ said 32."""
    arrays = [np.empty(256, np.float32) for _ in range(1000)]
    shape = Shape(256 * 1000, 4, 2, 256, 1000)
    assert len(Buckets(arrays, 1 << 16)) == 16
    assert bucketed(shape, 1 << 16, "all-reduce", "dp").count == 16
