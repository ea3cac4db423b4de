"""Context parallelism in the hybrid mesh equals one device: on every mesh of the world with
cp > 1 (beside dp, pp and tp), under each attention scheme and layout, with a key/value head
for each query head or for two, three steps give one device's losses, gradient norms, and each
shard's gradients and parameters; the checkpoint it writes is one device's whole state."""

import numpy as np
from device_helpers import host, on_device
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict
from pipeline_helpers import LIVE, free_last, make_optimizer

from scratchpar import nn
from scratchpar.comm.mesh import Mesh, factorizations
from scratchpar.parallel import SingleDevice
from scratchpar.parallel.context import SCHEMES
from scratchpar.parallel.hybrid import Hybrid
from scratchpar.parallel.pipeline import partition, schedules
from scratchpar.parallel.pipeline.partition import parameter_counts
from scratchpar.parallel.tensor.layout import Split
from scratchpar.train.task import Task

VOCAB = 11
# Adam moves a parameter by lr·m/(√v + ε) however small its gradient: a key bias, whose exact
# gradient is 0 (softmax ignores a shift shared by every key), moves by its rounding noise
# over ε, some 1e-11 a step, which no two orders of summation share.
ADAM_ATOL = 1e-9


def meshes(size):
    """Every (dp, pp, cp, tp) of ``size`` ranks with cp > 1."""
    return [(dp, pp, cp, tp) for dp, pp, cp, tp in factorizations(size, 4) if cp > 1]


def gpt(t, groups, seed, tied, grouped):
    """Two blocks of ``groups`` key/value heads, each shared by two query heads where
    ``grouped`` (its MLP then 5 wide per group), else one."""
    gen = np.random.default_rng(seed)
    heads = groups * (2 if grouped else 1)
    return Task(None, nn.GPT(VOCAB, t, 4 * heads, heads, 2, gen, dtype=np.float64,
                             tie_embeddings=tied, kv_heads=groups,
                             d_ff=5 * groups if grouped else None), "tok")


def make(comm, task, shape, scheme, layout, sp, m, adam, clip):
    free_last()
    dp, pp, cp, tp = shape
    mesh = Mesh(comm, dp=dp, pp=pp, tp=tp, cp=cp)
    ranges = partition(parameter_counts(task.model.pipeline_layers()), pp)
    pipe = Hybrid(task.model, make_optimizer(adam), task, mesh,
                  schedule=schedules.build("1f1b", pp, m, 1), ranges=ranges,
                  sequence_parallel=sp, attention=scheme, layout=layout, grad_clip=clip)
    LIVE.extend([mesh.free, pipe.close])
    return pipe


def mine(pipe, name, whole):
    """This rank's part of the one-device array ``whole`` of parameter ``name``."""
    layout, tp = pipe.layouts[pipe.stage.names.index(name)], pipe.mesh.tp_comm
    return layout.take(whole, tp.rank, tp.size) if isinstance(layout, Split) else whole


@settings(max_examples=10)
@given(data=st.data(), scheme=st.sampled_from(sorted(SCHEMES)),
       layout=st.sampled_from(("zigzag", "contiguous")), sp=st.booleans(), tied=st.booleans(),
       chunk=st.integers(1, 2), m=st.integers(1, 2), adam=st.booleans(),
       clip=st.sampled_from((0.0, 0.5)), grouped=st.booleans(), seed=st.integers(0, 2**31))
@shared_verdict
def test_three_steps_on_a_cp_mesh_equal_one_device(comm, data, scheme, layout, sp, tied, chunk,
                                                   m, adam, clip, grouped, seed):
    if comm.size == 1:
        return
    shape = data.draw(st.sampled_from(meshes(comm.size)), label="dp, pp, cp, tp")
    dp, pp, cp, tp = shape
    t, groups = 2 * cp * chunk, cp * tp  # a zig-zag cut; Ulysses' groups over tp, then cp
    task, one = (gpt(t, groups, seed, tied, grouped) for _ in range(2))
    pipe = make(comm, task, shape, scheme, layout, sp, m, adam, clip)
    single = SingleDevice(one.model, make_optimizer(adam), one, grad_clip=clip)
    for step in range(3):
        batch = on_device(np.random.default_rng([seed, step]).integers(1, VOCAB,
                                                                        (dp * m + step, t + 1)))
        got, want = pipe.step(batch), single.step(batch)
        np.testing.assert_allclose([got["loss"], got["grad_norm"]],
                                   [want["loss"], want["grad_norm"]], rtol=1e-10)
    whole = dict(one.model.named_parameters())
    for name, p in zip(pipe.stage.names, pipe.params):
        np.testing.assert_allclose(host(p.grad), host(mine(pipe, name, whole[name].grad)),
                                   rtol=1e-9, atol=1e-12, err_msg=f"gradient of {name}")
        np.testing.assert_allclose(host(p.data), host(mine(pipe, name, whole[name].data)),
                                   rtol=1e-9, atol=ADAM_ATOL if adam else 1e-13, err_msg=name)
    state = pipe.state_dict()
    if comm.rank == 0:
        assert sorted(state["model"]) == sorted(whole)
        for name, w in whole.items():
            np.testing.assert_allclose(host(state["model"][name]), host(w.data), rtol=1e-9,
                                       atol=ADAM_ATOL if adam else 1e-13, err_msg=name)
