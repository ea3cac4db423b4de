"""Towers split over the ranks by branch equal one device's Towers: outputs, the input's
gradient and every parameter's gradient in float64, SGD steps, and the state gathered back, for
tower counts the world size does not divide (a rank may hold no tower)."""

import numpy as np
from device_helpers import host, on_device
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict

from scratchpar.autograd import Tensor
from scratchpar.autograd import functional as F
from scratchpar.comm.chunks import bounds
from scratchpar.nn import Towers
from scratchpar.optim import SGD
from scratchpar.parallel.branches import ParallelBranches

TIGHT = {"rtol": 1e-10, "atol": 1e-12}
sizes = st.lists(st.integers(1, 5), min_size=1, max_size=2)


def towers(seed, f, tower_sizes, k, classes):
    """A float64 Towers with every parameter moved off its initial value (biases off 0)."""
    model = Towers(f, tower_sizes, k, classes, np.random.default_rng(seed), dtype=np.float64)
    rng = np.random.default_rng([seed, 2])
    for p in model.parameters():
        p.data += on_device(0.3 * rng.standard_normal(p.shape))
    return model


def twins(comm, seed, f, tower_sizes, k, classes):
    """(this rank's share, one device's Towers), from the same weights."""
    return ParallelBranches(towers(seed, f, tower_sizes, k, classes), comm), \
        towers(seed, f, tower_sizes, k, classes)


@settings(max_examples=12)
@given(f=st.integers(1, 5), tower_sizes=sizes, k=st.integers(1, 5), classes=st.integers(1, 4),
       lead=st.lists(st.integers(1, 4), min_size=1, max_size=2), seed=st.integers(0, 2**31))
@shared_verdict
def test_branches_equal_one_device_outputs_and_gradients(comm, f, tower_sizes, k, classes, lead,
                                                         seed):
    share, twin = twins(comm, seed, f, tower_sizes, k, classes)
    x_host = np.random.default_rng([seed, 1]).standard_normal((*lead, f))  # (B, F) or (B, T, F)
    x, x_twin = (Tensor(on_device(x_host), requires_grad=True) for _ in range(2))
    y, y_twin = share(x), twin(x_twin)
    g = np.random.default_rng([seed, 3]).standard_normal(y.shape)  # ∂L/∂Y, alike on every rank
    y.backward(on_device(g))
    y_twin.backward(on_device(g))
    heads = comm.allgather_obj(host(share.head.weight.grad).tobytes())  # collectives first
    np.testing.assert_allclose(host(y.data), host(y_twin.data), **TIGHT)
    np.testing.assert_allclose(host(x.grad), host(x_twin.grad), **TIGHT)  # f's all-reduce
    start, stop = bounds(k, comm.size)[comm.rank]
    assert [name for name, _ in share.named_parameters()] == [
        n for n, _ in twin.named_parameters()
        if n.startswith(tuple(f"towers.{i}." for i in range(start, stop)))
    ] + ["head.weight", "head.bias"]  # global tower indices: the model's own names
    theirs = dict(twin.named_parameters())
    for name, p in share.named_parameters():
        np.testing.assert_allclose(host(p.grad), host(theirs[name].grad), **TIGHT, err_msg=name)
    assert len(set(heads)) == 1  # the replicated head's gradient is bitwise the same everywhere


@settings(max_examples=6)
@given(f=st.integers(1, 4), tower_sizes=sizes, k=st.integers(1, 5), classes=st.integers(2, 4),
       seed=st.integers(0, 2**31))
@shared_verdict
def test_sgd_steps_on_branches_leave_one_devices_parameters(comm, f, tower_sizes, k, classes,
                                                            seed):
    share, twin = twins(comm, seed, f, tower_sizes, k, classes)
    sgd, sgd_twin = SGD(share.parameters(), 0.1, momentum=0.5), SGD(twin.parameters(), 0.1,
                                                                       momentum=0.5)
    rng = np.random.default_rng([seed, 4])
    for _ in range(3):
        x, y = on_device(rng.standard_normal((5, f))), on_device(rng.integers(0, classes, 5))
        for model, opt in ((share, sgd), (twin, sgd_twin)):
            opt.zero_grad()
            F.cross_entropy(model(Tensor(x)), y).backward()  # x needs no gradient here
            opt.step()
    whole = share.whole_state_dict()  # the collective first, then the checks
    theirs = twin.state_dict()
    for name, a in share.state_dict().items():
        np.testing.assert_allclose(host(a), host(theirs[name]), **TIGHT, err_msg=name)
    if comm.rank == 0:  # the gathered shards are one device's model, names in its order
        assert list(whole) == list(theirs)
        for name, a in whole.items():
            np.testing.assert_allclose(host(a), host(theirs[name]), **TIGHT, err_msg=name)
    else:
        assert whole is None


@settings(max_examples=4)
@given(k=st.integers(1, 5), seed=st.integers(0, 2**31))
@shared_verdict
def test_a_whole_state_dict_gathers_back_exactly_and_loads_into_any_share(comm, k, seed):
    share, twin = twins(comm, seed, 3, [4, 2], k, 3)
    whole = share.whole_state_dict()
    if comm.rank == 0:
        assert list(whole) == list(twin.state_dict())
        for name, a in twin.state_dict().items():
            np.testing.assert_array_equal(host(whole[name]), host(a), err_msg=name)
    other = ParallelBranches(towers(seed + 1, 3, [4, 2], k, 3), comm)
    other.load_state_dict(twin.state_dict())  # a one-device checkpoint, keyed the same way
    for name, a in other.state_dict().items():
        np.testing.assert_array_equal(host(a), host(twin.state_dict()[name]), err_msg=name)
