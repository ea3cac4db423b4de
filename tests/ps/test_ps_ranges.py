"""Key ranges: every key of every parameter belongs to exactly one server, and a server's buffer
gathers and scatters back exactly its keys, whatever the sizes and the number of servers."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scratchpar.parallel.ps import KeyRanges

sizes = st.lists(st.integers(0, 7), min_size=1, max_size=5)


@given(sizes=sizes, servers=st.integers(1, 5))
def test_the_servers_buffers_laid_end_to_end_are_the_flat_parameters(sizes, servers):
    arrays = [np.arange(n, dtype=np.float64) + 100 * i for i, n in enumerate(sizes)]
    ranges = KeyRanges(sizes, servers)
    flat = np.concatenate([ranges.gather(arrays, s) for s in range(servers)])
    np.testing.assert_array_equal(flat, np.concatenate(arrays))
    assert sum(ranges.lengths) == sum(sizes) and max(ranges.lengths) - min(ranges.lengths) <= 1


@given(sizes=sizes, servers=st.integers(1, 5), seed=st.integers(0, 2**31))
def test_scatter_writes_back_exactly_the_servers_keys(sizes, servers, seed):
    gen = np.random.default_rng(seed)
    shapes = [(n,) if n % 2 else (n // 2, 2) for n in sizes]  # 2-D parameters too
    ranges = KeyRanges([int(np.prod(s)) for s in shapes], servers)
    targets = [np.zeros(s) for s in shapes]
    sources = [gen.standard_normal(s) for s in shapes]
    for s in range(servers):
        ranges.scatter(ranges.gather(sources, s), targets, s)
    for got, want in zip(targets, sources):
        np.testing.assert_array_equal(got, want)


def test_a_server_may_own_no_key_and_none_is_refused():
    ranges = KeyRanges([2], 3)
    assert ranges.lengths == [1, 1, 0] and ranges.pieces[2] == []
    with pytest.raises(ValueError, match="at least one server"):
        KeyRanges([2], 0)
