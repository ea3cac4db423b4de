"""Model distribution on real ranks, the naive schedule of a pipeline as deep as the world
(Huang et al. 2019, GPipe, Fig. 2b): each rank holds its own layers only, and three steps
equal three one-device steps, gradients and parameters."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict
from pipeline_helpers import KINDS, make_batch, make_optimizer, make_task
from test_mpi_pipeline import assert_like_one_device

from scratchpar.comm.mesh import Mesh
from scratchpar.parallel import Pipeline, SingleDevice
from scratchpar.parallel.pipeline import partition, schedules
from scratchpar.parallel.pipeline.partition import parameter_counts


@settings(max_examples=6)
@given(kind=st.sampled_from(KINDS), adam=st.booleans(), seed=st.integers(0, 2**31))
@shared_verdict
def test_model_distribution_equals_one_device(comm, kind, adam, seed):
    mine, one = make_task(kind, seed, depth=max(4, comm.size)), \
        make_task(kind, seed, depth=max(4, comm.size))
    whole = sum(p.size for p in one.model.parameters())
    mesh = Mesh(comm, dp=1, pp=comm.size, tp=1)
    ranges = partition(parameter_counts(mine.model.pipeline_layers()), comm.size)
    strategy = Pipeline(mine.model, make_optimizer(adam), mine, mesh,
                        schedule=schedules.naive(comm.size), ranges=ranges, grad_clip=0.5)
    try:
        held = comm.allgather_obj(sum(p.size for p in strategy.params))
        assert sum(held) >= whole and (comm.size == 1 or max(held) < whole)  # each its layers
        single = SingleDevice(one.model, make_optimizer(adam), one, grad_clip=0.5)
        for step in range(3):
            batch = make_batch(kind, 3 + step, seed + step)
            got, want = strategy.step(batch), single.step(batch)
            np.testing.assert_allclose([got["loss"], got["grad_norm"]],
                                       [want["loss"], want["grad_norm"]], rtol=1e-10)
        assert_like_one_device(strategy, one, rtol=1e-9, atol=1e-10 if adam else 1e-13)
    finally:
        strategy.close()
        mesh.free()
