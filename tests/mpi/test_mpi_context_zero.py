"""ZeRO over dp × cp equals one device: every stage, on every dp × cp mesh of the world with cp
> 1, under each attention scheme, three steps give one device's losses, gradient norms and
parameters (each rank's chunks reduced over dp and cp at once), and the whole state."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict
from pipeline_helpers import LIVE, draw_cp, free_last, make_optimizer, same_state, same_steps

from scratchpar import nn
from scratchpar.comm.mesh import Mesh
from scratchpar.parallel import SingleDevice, ZeRO1, ZeRO2, ZeRO3
from scratchpar.parallel.context import SCHEMES
from scratchpar.train.task import Task

VOCAB = 11
STAGES = {1: ZeRO1, 2: ZeRO2, 3: ZeRO3}


def gpt(t, heads, seed):
    gen = np.random.default_rng(seed)
    return Task(None, nn.GPT(VOCAB, t, 4 * heads, heads, 2, gen, dtype=np.float64), "tok")


@settings(max_examples=8)
@given(data=st.data(), stage=st.sampled_from(sorted(STAGES)),
       scheme=st.sampled_from(sorted(SCHEMES)), chunk=st.integers(1, 2), adam=st.booleans(),
       clip=st.sampled_from((0.0, 0.5)), seed=st.integers(0, 2**31))
@shared_verdict
def test_three_steps_of_zero_on_a_dp_cp_mesh_equal_one_device(comm, data, stage, scheme, chunk,
                                                              adam, clip, seed):
    if comm.size == 1:
        return
    cp = draw_cp(data, comm.size, 2)
    free_last()
    t, heads = 2 * cp * chunk, cp  # a zig-zag cut; Ulysses' heads over cp
    task, one = gpt(t, heads, seed), gpt(t, heads, seed)
    mesh = Mesh(comm, cp=cp)
    zero = STAGES[stage](task.model, make_optimizer(adam), task, mesh, grad_clip=clip,
                         attention=scheme)
    LIVE.extend([mesh.free, zero.close])
    single = SingleDevice(one.model, make_optimizer(adam), one, grad_clip=clip)
    same_steps(zero, single, mesh.dp, t, VOCAB, seed)
    same_state(comm, zero, one.model, 1e-10 if adam else 1e-13)
