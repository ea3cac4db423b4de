"""What sets ZeRO's stage 1 and stage 2 apart: when each reduces, and what each keeps whole."""

import hashlib

import numpy as np
from device_helpers import host
from dp_helpers import everywhere, make_batch, make_task

from scratchpar.optim import Adam
from scratchpar.parallel.ledger import Ledger
from scratchpar.parallel.zero.stage1 import ZeRO1
from scratchpar.parallel.zero.stage2 import ZeRO2
from scratchpar.trace.tracer import Tracer

BUCKET = 256  # bytes: the tiny GPT's 20 arrays fill several buckets


def trained(cls, mesh, steps: int = 3, traced: bool = False):
    comm, task = mesh.world, make_task("gpt", 11)
    zero = cls(task.model, lambda params: Adam(params, lr=0.01), task, mesh,
               bucket_bytes=BUCKET, grad_clip=0.5)
    ledger = zero.attach(Ledger())
    for step in range(steps):
        comm.tracer = Tracer(comm.rank) if traced and step == steps - 1 else None
        try:
            zero.step(make_batch("gpt", 6, step))
            events = comm.tracer.events if comm.tracer is not None else []
        finally:
            comm.tracer = None
    return zero, events, ledger


def digest(arrays) -> str:
    return hashlib.sha256(b"".join(host(a).tobytes() for a in arrays)).hexdigest()


def test_stage1_and_stage2_reduce_the_same_buckets_to_the_same_bits(comm, mesh):
    one, _, _ = trained(ZeRO1, mesh)
    two, _, _ = trained(ZeRO2, mesh)
    assert [g.n for g in one.groups] == [g.n for g in two.groups] and len(one.groups) > 2
    assert digest(one.gradients()) == digest(two.gradients())
    assert digest(everywhere(comm, one.state_dict())["model"].values()) == \
        digest(everywhere(comm, two.state_dict())["model"].values())


def test_stage1_reduces_after_backward_and_stage2_while_it_runs(comm, mesh):
    for cls, during in ((ZeRO1, False), (ZeRO2, True)):
        zero, events, _ = trained(cls, mesh, traced=True)
        backward = next(e for e in events if e.name == "backward")
        starts = [e.start for e in events if e.name.startswith("reduce_scatter")]
        assert len(starts) == len(zero.groups)
        if during:  # each bucket starts once its gradients are final, before backward returns
            assert max(starts) < backward.end
        else:
            assert min(starts) >= backward.end


def test_stage1_keeps_the_whole_gradient_and_stage2_only_its_chunk(comm, mesh):
    """Stage 2's buckets in flight are timing's: how many overlap depends on how fast the
    ranks poll, so only the persistent gradient is held to the chunk."""
    one, _, held1 = trained(ZeRO1, mesh)
    two, _, held2 = trained(ZeRO2, mesh)
    whole = sum(int(np.prod(s)) for s in one.shapes) * 8  # float64
    chunks = sum(g.hi - g.lo for g in two.groups) * 8
    assert held1.peak["gradients"] >= whole
    assert held2.peak["gradients"] == chunks
    largest = max(g.n for g in two.groups) * 8
    assert held2.peak["buckets"] >= largest  # a bucket beside the gradients it packs
    assert all(p.grad is None for p in one.params + two.params)  # packed, then dropped
