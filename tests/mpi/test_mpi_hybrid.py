"""The hybrid dp × pp × tp mesh on real ranks equals one device, on every factorization of the
world: losses, gradient norms (no parameter counted twice), each shard's gradients and
parameters after three steps; replicated parameters stay bitwise equal across their tp group;
and checkpoints hold whole tensors that reshard into any other layout."""

import hashlib

import numpy as np
from device_helpers import host
from dp_helpers import assert_same_state, snapshot
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict
from pipeline_helpers import make_batch, make_hybrid, make_optimizer, make_task

from scratchpar.comm.mesh import factorizations
from scratchpar.parallel import SingleDevice
from scratchpar.parallel.tensor.layout import Split

TENSOR_KINDS = ("mlp", "gpt", "tied")
SCHEDULES = ("gpipe", "1f1b", "bprio", "zb-h1")


def single_device(one, adam, clip):
    return SingleDevice(one.model, make_optimizer(adam), one, grad_clip=clip)


def whole_slice(pipe, name, layout, whole):
    """This rank's part of the one-device array ``whole`` of parameter ``name``."""
    tp = pipe.mesh.tp_comm
    return layout.take(whole, tp.rank, tp.size) if isinstance(layout, Split) else whole


def assert_shards_like_one_device(pipe, one, rtol, atol):
    want = dict(one.model.named_parameters())
    for name, p, layout in zip(pipe.stage.names, pipe.params, pipe.layouts):
        w = want[name]
        np.testing.assert_allclose(host(p.grad), host(whole_slice(pipe, name, layout, w.grad)),
                                   rtol=rtol, atol=atol, err_msg=f"gradient of {name}")
        np.testing.assert_allclose(host(p.data), host(whole_slice(pipe, name, layout, w.data)),
                                   rtol=rtol, atol=atol, err_msg=name)


def replicated_digest(pipe) -> str:
    """A digest of this rank's replicated (not split) parameters' bytes."""
    data = b"".join(host(p.data).tobytes() for p, layout in zip(pipe.params, pipe.layouts)
                    if not isinstance(layout, Split))
    return hashlib.sha256(data).hexdigest()


@settings(max_examples=12)
@given(data=st.data(), kind=st.sampled_from(TENSOR_KINDS), schedule=st.sampled_from(SCHEDULES),
       m=st.integers(1, 3), extra=st.integers(0, 3), adam=st.booleans(),
       clip=st.sampled_from((0.0, 0.5)), sp=st.booleans(), seed=st.integers(0, 2**31))
@shared_verdict
def test_three_steps_on_any_mesh_equal_three_single_device_steps(comm, data, kind, schedule, m,
                                                                 extra, adam, clip, sp, seed):
    dp, pp, tp = data.draw(st.sampled_from(factorizations(comm.size)), label="dp, pp, tp")
    mine, one = make_task(kind, seed), make_task(kind, seed)
    sp = sp and kind != "mlp"  # sequence parallelism shards a transformer's sequence
    pipe = make_hybrid(comm, mine, schedule, dp, pp, tp, m, adam, clip, sp)
    single = single_device(one, adam, clip)
    for step in range(3):
        batch = make_batch(kind, dp * m + extra + step, seed + step)
        got, want = pipe.step(batch), single.step(batch)
        np.testing.assert_allclose([got["loss"], got["grad_norm"]],
                                   [want["loss"], want["grad_norm"]], rtol=1e-10)
    assert_shards_like_one_device(pipe, one, rtol=1e-9, atol=1e-10 if adam else 1e-13)
    digests = pipe.mesh.tp_comm.allgather_obj(replicated_digest(pipe))
    assert len(set(digests)) == 1, "replicated parameters drifted apart in the tp group"


@settings(max_examples=6)
@given(data=st.data(), kind=st.sampled_from(TENSOR_KINDS), seed=st.integers(0, 2**31))
@shared_verdict
def test_a_checkpoint_is_whole_and_reshards_into_any_other_layout(comm, data, kind, seed):
    """Saved at one (dp, pp, tp), the state is one device's (rank 0); loaded at another, or
    on one device, the next step's outputs equal one device's."""
    first = data.draw(st.sampled_from(factorizations(comm.size)), label="saved at")
    second = data.draw(st.sampled_from(factorizations(comm.size)), label="resumed at")
    mine, one = make_task(kind, seed), make_task(kind, seed)
    pipe = make_hybrid(comm, mine, "1f1b", *first, 2, adam=True)
    single = single_device(one, True, 0.0)
    for step in range(2):
        batch = make_batch(kind, first[0] * 2 + 1, seed + step)
        pipe.step(batch)
        single.step(batch)
    state = pipe.state_dict()
    want = snapshot(single.state_dict())
    pipe.gather_model()
    resumed = make_hybrid(comm, make_task(kind, seed + 1), "gpipe", *second, 2, adam=True)
    resumed.load_state_dict(want)
    batch = make_batch(kind, second[0] * 2 + 3, seed + 9)
    got, expected = resumed.step(batch), single.step(batch)  # every message sent: now assert
    np.testing.assert_allclose(got["loss"], expected["loss"], rtol=1e-12)
    assert_shards_like_one_device(resumed, one, rtol=1e-9, atol=1e-10)
    if comm.rank != 0:
        assert state is None
        return
    assert_same_state(state, want)
    for (name, got), w in zip(mine.model.named_parameters(), want["model"].values()):
        np.testing.assert_allclose(host(got.data), host(w), rtol=1e-9, atol=1e-10,
                                   err_msg=name)  # Adam on rounding-level gradients
