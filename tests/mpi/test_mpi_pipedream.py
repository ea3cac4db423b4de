"""PipeDream on real ranks equals a sequential emulation of its own update rule: micro-batch i
runs forward and backward on stage s's weights after max(0, i − (p − s − 1)) of the step's
updates, and every stage applies each micro-batch's gradient as soon as its backward is done."""

import numpy as np
from device_helpers import host
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict
from pipeline_helpers import make_batch, make_pipeline, make_task

from scratchpar.data.shard import shard
from scratchpar.optim import SGD
from scratchpar.parallel.pipeline.partition import parameter_counts, partition

LR = 0.1


def emulate(task, batches, p: int, m: int):
    """Plain SGD with PipeDream's staleness, on one process; returns the final parameters."""
    model = task.model
    layers = model.pipeline_layers()
    ranges = partition(parameter_counts(layers), p)
    stage_of = {id(q): s for s, span in enumerate(ranges) for i in span
                for q in layers[i].parameters()}
    params = model.parameters()
    for batch in batches:
        micro = [shard(batch, i, m) for i in range(m)]
        versions = [[q.data.copy() for q in params]]  # versions[k]: after k updates, per stage
        for i, mb in enumerate(micro):
            for q, j in zip(params, range(len(params))):
                s = stage_of[id(q)]
                q.data[...] = versions[max(0, i - (p - s - 1))][j]  # PipeDream §3.3: stale
            model.zero_grad()
            task.loss(model, mb, "mean").backward()
            latest = versions[-1]
            versions.append([w - LR * q.grad for w, q in zip(latest, params)])
        for q, w in zip(params, versions[-1]):
            q.data[...] = w
    return {name: host(q.data) for name, q in model.named_parameters()}


@settings(max_examples=6)
@given(kind=st.sampled_from(("mlp", "gpt", "lstm")), m=st.integers(1, 5),
       seed=st.integers(0, 2**31))
@shared_verdict
def test_pipedream_equals_the_emulation_of_its_update_rule(comm, kind, m, seed):
    p = comm.size
    mine, one = make_task(kind, seed), make_task(kind, seed)
    pipe = make_pipeline(comm, mine, "pipedream", p, m,
                         optimizer=lambda params: SGD(params, lr=LR))  # plain, as emulated
    batches = [make_batch(kind, m + extra, seed + extra) for extra in range(2)]
    for batch in batches:
        pipe.step(batch)
    want = emulate(one, batches, p, m)
    for name, q in zip(pipe.stage.names, pipe.params):
        np.testing.assert_allclose(host(q.data), want[name], rtol=1e-10, atol=1e-13,
                                   err_msg=name)

