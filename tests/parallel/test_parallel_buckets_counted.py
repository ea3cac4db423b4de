"""The buckets a description prices: where the shape lists its arrays, exactly those the engine
packs (``comm/buckets.py``), in either order; where it does not (a pipeline stage), never fewer,
and near ⌈sΨ/b⌉ where every array is small beside a bucket (Li et al. 2020, §3.2)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchpar.comm.buckets import Buckets
from scratchpar.nn import unfilled
from scratchpar.nn.gpt import GPT
from scratchpar.parallel.description import Shape, bucketed


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(0, 3000), min_size=1, max_size=40),
       dtype=st.sampled_from([np.float16, np.float32, np.float64]),
       bucket_bytes=st.integers(1, 1 << 15), backward=st.booleans())
def test_listed_arrays_are_counted_as_the_engine_packs_them(sizes, dtype, bucket_bytes,
                                                            backward):
    arrays = [np.empty(n, dtype) for n in sizes]
    s, psi = np.dtype(dtype).itemsize, sum(sizes)
    listed = Shape(psi, s, 2, max(sizes), len(sizes), sizes=tuple(sizes))
    message = bucketed(listed, bucket_bytes, "all-reduce", "dp", backward=backward)
    assert message.count == len(Buckets(arrays[::-1] if backward else arrays, bucket_bytes))
    assert message.count * message.nbytes >= s * psi
    unlisted = bucketed(Shape(psi, s, 2, max(sizes), len(sizes)), bucket_bytes, "all-reduce",
                        "dp")
    assert message.count <= unlisted.count <= max(1, min(len(sizes),
                                                         2 * -(-s * psi // bucket_bytes)))


@pytest.mark.parametrize("bucket_mib, packed", [(1, 164), (25, 123)])
def test_a_1_2b_gpt_is_priced_the_buckets_data_parallelism_packs(bucket_mib, packed):
    """The docs' 1.2B GPT (plan.md): the bounds alone priced 245 buckets in either size."""
    with unfilled.deferred():
        model = GPT(51200, 1024, 2048, 16, 20, np.random.default_rng(0))
    message = bucketed(Shape.of(model, 4, 2), bucket_mib << 20, "all-reduce", "dp")
    assert message.count == packed


def test_small_arrays_are_priced_near_the_expected_count():
    """A thousand arrays of 1 KiB in buckets of 64 KiB: the engine packs 16 and ⌈sΨ/(b − sL)⌉
    says 16, where 2⌈sΨ/b⌉ said 32."""
    arrays = [np.empty(256, np.float32) for _ in range(1000)]
    shape = Shape(256 * 1000, 4, 2, 256, 1000)
    assert len(Buckets(arrays, 1 << 16)) == 16
    assert bucketed(shape, 1 << 16, "all-reduce", "dp").count == 16
