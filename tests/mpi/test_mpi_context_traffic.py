"""The bytes each context-parallel scheme sends, traced at every posted message of a real block
on real ranks, are ``traffic.py``'s formula exactly, with a key/value head for each query head
or one for a group of them: the ring and the all-gather move G of H heads, Ulysses its q and
output whole and its k and v by G/H."""

import numpy as np
import pytest
from device_helpers import on_device
from mpi_helpers import shared_verdict

from scratchpar.autograd import Tensor
from scratchpar.bench.context.worker import sent, watched
from scratchpar.nn import Block
from scratchpar.parallel.context import SCHEMES, Context, traffic
from scratchpar.trace.tracer import Tracer

B, C, H = 2, 16, 4


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@pytest.mark.parametrize("groups", [4, 2])
@shared_verdict
def test_each_rank_sends_the_formula_s_bytes(comm, scheme, groups):
    cp, t = comm.size, 8 * comm.size  # a zig-zag cut into 2cp chunks of 4
    if cp == 1 or scheme == "ulysses" and groups % cp:
        return
    context = Context(comm.dup(name="traced"), "zigzag")
    try:
        block = Block(C, H, np.random.default_rng(0), kv_heads=groups)
        block.attn.core = SCHEMES[scheme](context)
        whole = np.random.default_rng(1).standard_normal((B, t, C)).astype(np.float32)
        x = Tensor(on_device(whole[:, context.mine(t)]), requires_grad=True)  # (B, T/cp, C)
        with watched(context.comm, Tracer(comm.rank)) as forward:
            y = block(x)
        with watched(context.comm, Tracer(comm.rank)) as backward:
            y.backward(y.xp.ones_like(y.data))
        a = 4 * B * (t // cp) * C  # one rank's activation, float32
        for phase, tracer in (("forward", forward), ("backward", backward)):
            want = sum(m.wire(cp) * m.count for m in traffic(scheme, cp, a, 1, 4, H // groups)
                       if m.behind == phase)
            assert sent(tracer) == want, (phase, sent(tracer), want)
    finally:
        context.comm.free()
