"""The sequence-parallel block on real ranks equals ``nn.Block`` on one device: rank r's
output shard is rows ``bounds(T, t)[r]`` of the twin's output, the shards' input gradients
join into the twin's, split parameters' gradients are their slices of the twin's, and the
partial ones (LayerNorms, biases after a reduce-scatter) sum over the group to the twin's; in
float64, for sequence lengths the group size does not divide (shorter than the group
included), with and without dropout."""

import numpy as np
from device_helpers import host, on_device
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict

from scratchpar import nn
from scratchpar.autograd import Tensor
from scratchpar.comm.chunks import bounds
from scratchpar.device_rng import DeviceRandom
from scratchpar.parallel.tensor.block import SequenceParallelBlock
from scratchpar.parallel.tensor.layout import PARTIAL, Split, layouts

TIGHT = {"rtol": 1e-10, "atol": 1e-12}
PARTS = {"ln1.weight", "ln1.bias", "attn.proj.bias", "ln2.weight", "ln2.bias", "mlp.2.bias"}


def block(heads, d, p, seed):
    """A twin with every parameter drawn anew: no gradient hides behind a zero or a one."""
    twin = nn.Block(heads * d, heads, np.random.default_rng(seed), dropout=p, dtype=np.float64)
    rng = np.random.default_rng([seed, 2])
    twin.load_state_dict({name: 0.5 * rng.standard_normal(q.shape)
                          for name, q in twin.named_parameters()})
    return twin


def gathered(comm, a):
    """Every rank's host copy of ``a``, in rank order."""
    return comm.allgather_obj(host(a), "test arrays")


@settings(max_examples=12)
@given(heads=st.integers(1, 4), d=st.integers(1, 2), b=st.integers(1, 2), t=st.integers(1, 7),
       p=st.sampled_from([0.0, 0.3]), seed=st.integers(0, 2**31))
@shared_verdict
def test_sequence_parallel_block_equals_its_twin(comm, heads, d, b, t, p, seed):
    twin = block(heads, d, p, seed)
    shard = SequenceParallelBlock(twin, comm)
    assert {k for k, v in layouts(shard).items() if v == PARTIAL} == PARTS
    nn.set_dropout_generator(twin, DeviceRandom(seed))
    nn.set_dropout_generator(shard, DeviceRandom(seed))
    mine = slice(*bounds(t, comm.size)[comm.rank])  # this rank's tokens
    whole = np.random.default_rng([seed, 1]).standard_normal((b, t, heads * d))
    x = Tensor(on_device(whole[:, mine]), requires_grad=True)  # (B, T_r, C)
    x_twin = Tensor(on_device(whole), requires_grad=True)  # (B, T, C)
    y, y_twin = shard(x), twin(x_twin)
    g = np.random.default_rng([seed, 3]).standard_normal((b, t, heads * d))
    y.backward(on_device(g[:, mine]))
    y_twin.backward(on_device(g))
    x_grad = np.concatenate(gathered(comm, x.grad), axis=1)  # (B, T, C)
    # the strategy sums the partial gradients over the group; the test does it here
    grads = {name: sum(gathered(comm, q.grad)) if name in PARTS else host(q.grad)
             for name, q in shard.named_parameters()}
    # every collective is behind us: a rank that fails now leaves none of the others waiting
    np.testing.assert_allclose(host(y.data), host(y_twin.data)[:, mine], **TIGHT)
    np.testing.assert_allclose(x_grad, host(x_twin.grad), **TIGHT)
    wanted = dict(twin.named_parameters())
    assert list(grads) == list(wanted)
    for name, layout in layouts(shard).items():
        want = host(wanted[name].grad)
        if isinstance(layout, Split):
            want = layout.take(want, comm.rank, comm.size)
        np.testing.assert_allclose(grads[name], want, err_msg=name, **TIGHT)
    assert shard.mlp[3].gen.state == twin.mlp[3].gen.state  # the streams stay in step


@settings(max_examples=4)
@given(t=st.integers(1, 6), seed=st.integers(0, 2**31))
@shared_verdict
def test_in_eval_the_sequence_parallel_block_drops_nothing_and_draws_nothing(comm, t, seed):
    twin = block(2, 2, 0.5, seed).eval()
    shard = SequenceParallelBlock(twin, comm).eval()
    gen = DeviceRandom(seed)
    nn.set_dropout_generator(shard, gen)
    mine = slice(*bounds(t, comm.size)[comm.rank])
    whole = np.random.default_rng([seed, 1]).standard_normal((2, t, 4))
    y = shard(Tensor(on_device(whole[:, mine])))
    np.testing.assert_allclose(host(y.data), host(twin(Tensor(on_device(whole))).data)[:, mine],
                               **TIGHT)
    assert gen.position == 0
