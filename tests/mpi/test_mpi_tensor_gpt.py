"""A whole GPT cut by ``tensor_parallel`` on real ranks equals the GPT it was cut from: logits
(this rank's vocabulary columns), loss, and the gradient of every replicated parameter, in
float64, for vocabularies smaller than the group (a rank owning no column at all)."""

import numpy as np
import pytest
from device_helpers import host, on_device

from scratchpar import nn
from scratchpar.comm.chunks import bounds
from scratchpar.parallel.tensor import tensor_parallel
from scratchpar.parallel.tensor.layout import Split, layouts

TIGHT = {"rtol": 1e-10, "atol": 1e-12}


@pytest.mark.parametrize("vocab", [2, 3, 7])
@pytest.mark.parametrize("tied", [False, True])
def test_a_cut_gpt_equals_its_whole_even_where_a_rank_owns_no_vocabulary(comm, vocab, tied):
    gpt = nn.GPT(vocab, 6, 8, 2, 1, np.random.default_rng(vocab), dtype=np.float64,
                 tie_embeddings=tied)
    twin = nn.GPT(vocab, 6, 8, 2, 1, np.random.default_rng(vocab), dtype=np.float64,
                  tie_embeddings=tied)
    shard = tensor_parallel(gpt, comm)
    batch = on_device(np.random.default_rng(1).integers(1, vocab, (3, 6)))  # (b, n+1)
    x, y = nn.shift(batch)
    logits, logits_twin = shard(x), twin(x)  # (b, n, V/t), (b, n, V)
    start, stop = bounds(vocab, comm.size)[comm.rank]
    assert logits.shape[-1] == stop - start
    loss, loss_twin = shard.output_loss(logits, y), nn.lm_output_loss(logits_twin, y)
    loss.backward()
    loss_twin.backward()
    np.testing.assert_allclose(host(logits.data), host(logits_twin.data)[..., start:stop], **TIGHT)
    np.testing.assert_allclose(host(loss.data), host(loss_twin.data), **TIGHT)
    whole = dict(twin.named_parameters())
    for name, p in shard.named_parameters():
        if not isinstance(layouts(shard)[name], Split):  # replicated: the whole gradient here
            np.testing.assert_allclose(host(p.grad), host(whole[name].grad), **TIGHT)
