"""ZeRO's pieces on one process: flat groups, the ledger, the formula, the rebound optimizer."""

import numpy as np
import pytest

from scratchpar.nn.module import Parameter
from scratchpar.optim import SGD, Adam
from scratchpar.parallel.ledger import Ledger
from scratchpar.parallel.zero.flat import FlatGroup, Shard
from scratchpar.parallel.zero.formula import formula


@pytest.mark.parametrize("ranks", [1, 2, 3, 4, 7])
def test_flat_group_chunks_tile_the_parameters_exactly(ranks):
    gen = np.random.default_rng(0)
    params = [Parameter(gen.standard_normal(shape)) for shape in [(3, 4), (5,), (2, 1, 3)]]
    groups = [FlatGroup(params, ranks, r) for r in range(ranks)]
    flat = groups[0].flatten(np, [p.data for p in params])  # (23,)
    assert flat.size == 23 == groups[0].n
    joined = np.concatenate([g.owned(flat) for g in groups])
    np.testing.assert_array_equal(joined, flat)
    assert max(g.hi - g.lo for g in groups) - min(g.hi - g.lo for g in groups) <= 1
    groups[0].bind(flat)
    flat[:] = np.arange(23)
    np.testing.assert_array_equal(params[1].data, np.arange(12, 17))  # views of the vector
    groups[0].pack([None, params[1].data, None], flat)
    assert flat[:12].sum() == 0 and flat[17:].sum() == 0  # None counts as zeros


def test_flat_group_refuses_mixed_dtypes():
    with pytest.raises(ValueError, match="one dtype"):
        FlatGroup([Parameter(np.ones(2)), Parameter(np.ones(2, np.float32))], 2, 0)


def test_ledger_counts_each_buffer_once_and_keeps_the_peaks():
    ledger = Ledger()
    a, b = np.zeros(100), np.zeros(10)
    now = ledger.sample({"x": [a, a[:50], a.reshape(10, 10)], "y": [a[3:], b, None]})
    assert now == {"x": 800, "y": 80}  # views of a are a, counted under the first part
    ledger.sample({"x": [b], "y": []})
    assert ledger.peak == {"x": 800, "y": 80} and ledger.at_peak == {"x": 800, "y": 80}
    assert ledger.total() == 880 and ledger.samples == 2


def test_formula_is_the_papers_for_adam_in_float32_and_in_mixed_precision():
    psi, n = 1000, 4
    total = {s: sum(formula(s, psi, n, 4, 8).values()) for s in range(4)}  # s = 4, K = 8
    assert total == {0: 16 * psi, 1: 8 * psi + 8 * psi / n, 2: 4 * psi + 12 * psi / n,
                     3: 16 * psi / n}
    mixed = {s: formula(s, psi, n, 2, 12) for s in range(4)}  # the paper's 2 + 2 + 12
    assert [sum(m.values()) for m in mixed.values()] == [
        16 * psi, 4 * psi + 12 * psi / n, 2 * psi + 14 * psi / n, 16 * psi / n]
    assert mixed[1] == {"parameters": 2 * psi, "gradients": 2 * psi, "optimizer": 12 * psi / n}
    offload = formula(2, psi, n, 4, 8, offload=True)
    assert offload == {"parameters": 4 * psi, "gradients": 0.0, "optimizer": 0.0,
                       "host": 16 * psi / n}


@pytest.mark.parametrize("make", [lambda p: SGD(p, lr=0.1, momentum=0.9, nesterov=True),
                                  lambda p: Adam(p, lr=0.01, weight_decay=0.1)])
def test_a_rebound_optimizer_steps_chunks_as_the_original_steps_the_whole(make):
    gen = np.random.default_rng(1)
    whole = Parameter(gen.standard_normal(10))
    original = make([whole])
    chunks = [Shard(whole.data[:4].copy()), Shard(whole.data[4:].copy())]
    twin = original.rebind(chunks)
    assert type(twin) is type(original) and twin.state == [{}, {}] and original.state == [{}]
    for _ in range(3):
        g = gen.standard_normal(10)
        whole.grad, chunks[0].grad, chunks[1].grad = g, g[:4].copy(), g[4:].copy()
        original.step()
        twin.step()
    np.testing.assert_array_equal(np.concatenate([c.data for c in chunks]), whole.data)
