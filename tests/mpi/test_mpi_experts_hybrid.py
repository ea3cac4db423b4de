"""Expert parallelism in the hybrid mesh equals one device: on every mesh of the world, with
the experts split over ep ranks folded onto dp × cp, a sparse GPT's steps give one device's
losses, gradient norms, and every rank's gradients and parameters (its experts' included),
dropless and with capacity counted over the micro-batch; with several micro-batches, one
device running the same micro-batches."""

import numpy as np
from device_helpers import host, on_device
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict
from pipeline_helpers import LIVE, free_last, make_optimizer

from scratchpar import nn
from scratchpar.comm.chunks import bounds
from scratchpar.comm.mesh import Mesh, factorizations
from scratchpar.data.shard import shard
from scratchpar.parallel import SingleDevice
from scratchpar.parallel.hybrid import Hybrid
from scratchpar.parallel.pipeline import partition, schedules
from scratchpar.parallel.pipeline.partition import parameter_counts
from scratchpar.parallel.tensor.layout import Split
from scratchpar.train.sharded import save_sharded
from scratchpar.train.stored import open_checkpoint
from scratchpar.train.task import Task

VOCAB = 11


def meshes(size):
    """Every (dp, pp, cp, tp, ep) of ``size`` ranks, ep dividing dp·cp."""
    return [(dp, pp, cp, tp, ep) for dp, pp, cp, tp in factorizations(size, 4)
            for ep in range(1, dp * cp + 1) if (dp * cp) % ep == 0]


def sparse_gpt(t, spec, every, seed):
    gen = np.random.default_rng(seed)
    return Task(None, nn.GPT(VOCAB, t, 8, 2, 2, gen, dtype=np.float64, experts=spec,
                             moe_every=every), "tok")


def make(comm, task, shape, m, adam, capacity="global"):
    free_last()
    dp, pp, cp, tp, ep = shape
    mesh = Mesh(comm, dp=dp, pp=pp, tp=tp, cp=cp, ep=ep)
    ranges = partition(parameter_counts(task.model.pipeline_layers()), pp)
    pipe = Hybrid(task.model, make_optimizer(adam), task, mesh,
                  schedule=schedules.build("1f1b", pp, m, 1), ranges=ranges, capacity=capacity)
    LIVE.extend([mesh.free, pipe.close])
    return pipe


def mine(pipe, name, whole):
    """This rank's part of the one-device array ``whole`` of parameter ``name``."""
    layout, tp = pipe.layouts[pipe.stage.names.index(name)], pipe.mesh.tp_comm
    return layout.take(whole, tp.rank, tp.size) if isinstance(layout, Split) else whole


def micro_groups(batch, dp, m):
    """The micro-batches one device runs to equal m micro-batches on each of dp replicas:
    group i joins every replica's i-th micro-batch, in dp order."""
    replicas = [batch[a:b] for a, b in bounds(batch.shape[0], dp)]
    return [np.concatenate([shard(r, i, m) for r in replicas]) for i in range(m)]


@settings(max_examples=12)
@given(data=st.data(), experts=st.sampled_from([2, 4]), k=st.integers(1, 2),
       factor=st.sampled_from([0.0, 0.5, 1.0]), every=st.integers(1, 2), adam=st.booleans(),
       seed=st.integers(0, 2**31))
@shared_verdict
def test_three_steps_on_an_ep_mesh_equal_one_device(comm, data, experts, k, factor, every,
                                                    adam, seed):
    if comm.size == 1:
        return
    shape = data.draw(st.sampled_from([s for s in meshes(comm.size) if experts % s[4] == 0]),
                      label="dp, pp, cp, tp, ep")
    dp, pp, cp, tp, ep = shape
    spec = nn.Experts(experts, k, factor, balance=0.1, z_loss=0.01)
    t = 2 * cp * 2
    task, one = sparse_gpt(t, spec, every, seed), sparse_gpt(t, spec, every, seed)
    pipe = make(comm, task, shape, 1, adam)
    single = SingleDevice(one.model, make_optimizer(adam), one)
    for step in range(3):
        batch = on_device(np.random.default_rng([seed, step]).integers(1, VOCAB,
                                                                        (dp + step, t + 1)))
        got, want = pipe.step(batch), single.step(batch)
        np.testing.assert_allclose([got["loss"], got["grad_norm"]],
                                   [want["loss"], want["grad_norm"]], rtol=1e-10)
        if step == 0:  # from the same weights: the loss and every gradient, to 1e-12
            first = [abs(got["loss"] - want["loss"]) / abs(want["loss"])] + [
                float(np.abs(host(p.grad) - host(mine(pipe, n, w.grad))).max(initial=0))
                / max(float(np.abs(host(w.grad)).max()), 1e-3)
                for n, p in zip(pipe.stage.names, pipe.params)
                for w in [dict(one.model.named_parameters())[n]]]
    assert max(first) <= 1e-12, f"the first step differs by {max(first):.1e} (relative)"
    whole = dict(one.model.named_parameters())
    held = {name.split(".experts.")[1].split(".")[0] for name in pipe.stage.names
            if ".experts." in name}  # this rank's experts, by their place among all E
    assert not held or len(held) == experts // ep
    for name, p in zip(pipe.stage.names, pipe.params):
        np.testing.assert_allclose(host(p.grad), host(mine(pipe, name, whole[name].grad)),
                                   rtol=1e-9, atol=1e-12, err_msg=f"gradient of {name}")
        # atol 1e-9 under Adam: a key bias's gradient is 0 but for rounding, which Adam's m/√v
        # turns into steps of 1e-11, different in each summation order (qkv.bias[C:2C])
        np.testing.assert_allclose(host(p.data), host(mine(pipe, name, whole[name].data)),
                                   rtol=1e-9, atol=1e-9 if adam else 1e-13, err_msg=name)


@settings(max_examples=6)
@given(data=st.data(), factor=st.sampled_from([0.0, 0.75]), seed=st.integers(0, 2**31))
@shared_verdict
def test_micro_batches_route_as_one_device_running_them(comm, data, factor, seed):
    """m = 2: each micro-batch's routing and aux losses are its own, over every replica's
    rows of it; one device accumulating the same micro-batches has the same gradient."""
    if comm.size == 1:
        return
    shape = data.draw(st.sampled_from([s for s in meshes(comm.size) if 4 % s[4] == 0]),
                      label="dp, pp, cp, tp, ep")
    dp, pp, cp, tp, ep = shape
    spec = nn.Experts(4, 2, factor, balance=0.1, z_loss=0.01)
    t = 4 * cp
    task, one = sparse_gpt(t, spec, 1, seed), sparse_gpt(t, spec, 1, seed)
    pipe = make(comm, task, shape, 2, False)
    batch = np.random.default_rng(seed).integers(1, VOCAB, (2 * dp + 1, t + 1))
    pipe.step(on_device(batch))
    units = 0
    for group in micro_groups(batch, dp, 2):
        one.loss(one.model, on_device(group), "sum").backward()
        units += group.shape[0] * t
    whole = dict(one.model.named_parameters())
    for name, p in zip(pipe.stage.names, pipe.params):
        want = host(mine(pipe, name, whole[name].grad)) / units
        np.testing.assert_allclose(host(p.grad), want, rtol=1e-9, atol=1e-12,
                                   err_msg=f"gradient of {name}")


@shared_verdict
def test_the_aux_gradient_and_the_experts_gradients_do_not_depend_on_the_layout(comm):
    """On every mesh of the world: the aux losses' part of each router's gradient (with the
    losses on, less with them off) is one device's, not scaled by dp, ep, tp or pp; and each
    expert's gradient is one device's, not ep times it (the ranks holding an expert sum its
    tokens' parts, they do not average them)."""
    t = 8

    def grads(shape, balance):
        spec = nn.Experts(4, 2, 0.0, balance=balance, z_loss=balance / 10)
        task = sparse_gpt(t, spec, 1, 5)
        batch = on_device(np.random.default_rng(6).integers(1, VOCAB, (8, t + 1)))
        if shape is None:
            SingleDevice(task.model, make_optimizer(False), task).step(batch)
            return {n: host(p.grad) for n, p in task.model.named_parameters()}
        pipe = make(comm, task, shape, 1, False)
        pipe.step(batch)
        return {n: host(p.grad) for n, p in zip(pipe.stage.names, pipe.params)}

    one_on, one_off = grads(None, 0.5), grads(None, 0.0)
    for shape in [s for s in meshes(comm.size) if 4 % s[4] == 0 and 8 % (s[0] * s[2]) == 0]:
        on, off = grads(shape, 0.5), grads(shape, 0.0)
        for name in on:
            if "router" in name:
                aux = on[name] - off[name]
                assert np.abs(aux).max() > 1e-6, "a router the aux losses do not reach"
                np.testing.assert_allclose(aux, one_on[name] - one_off[name], rtol=1e-8,
                                           atol=1e-13, err_msg=f"{name} on {shape}")
            if ".experts." in name:
                np.testing.assert_allclose(on[name], one_on[name], rtol=1e-9, atol=1e-13,
                                           err_msg=f"{name} on {shape}")


@settings(max_examples=6)
@given(data=st.data(), seed=st.integers(0, 2**31))
@shared_verdict
def test_an_ep_checkpoint_holds_each_element_once_and_resumes_at_any_ep_or_on_one_device(
        comm, tmp_path_factory, data, seed):
    """Trained at one mesh, the whole state gathers every rank's experts into one device's; its
    pieces hold each element once; another mesh and one device read them back bit for bit."""
    split = [s for s in meshes(comm.size) if s[4] > 1 and 4 % s[4] == 0]  # 4 experts
    if not split:  # a world of 3: no ep splits 4 experts
        return
    first = data.draw(st.sampled_from(split), label="saved at")
    second = data.draw(st.sampled_from([s for s in meshes(comm.size) if 4 % s[4] == 0]),
                       label="resumed at")
    spec, t = nn.Experts(4, 2, 1.0, balance=0.1, z_loss=0.01), 4 * max(first[2], second[2])
    task, one = sparse_gpt(t, spec, 1, seed), sparse_gpt(t, spec, 1, seed)
    pipe = make(comm, task, first, 1, True)
    single = SingleDevice(one.model, make_optimizer(True), one)
    for step in range(2):
        batch = on_device(np.random.default_rng([seed, step]).integers(1, VOCAB, (8, t + 1)))
        pipe.step(batch), single.step(batch)
    state = comm.allgather_obj(pipe.state_dict())[0]
    for name, p in one.model.named_parameters():
        np.testing.assert_allclose(host(state["model"][name]), host(p.data), rtol=1e-9,
                                   atol=1e-10, err_msg=name)  # Adam: rounding of near-0 steps
    want = as_bytes(state)
    pieces, scalars = pipe.pieces()
    written = sum(comm.allgather_obj(sum(host(p.array).nbytes for p in pieces)))
    assert written == sum(len(v) for v in want.values() if isinstance(v, bytes))
    directory = comm.allgather_obj(str(tmp_path_factory.mktemp("ck")))[0]
    save_sharded(directory, pieces, scalars, {"step": 2}, comm)
    resumed = make(comm, sparse_gpt(t, spec, 1, seed + 1), second, 1, True)
    alone = sparse_gpt(t, spec, 1, seed + 1)
    alone = SingleDevice(alone.model, make_optimizer(True), alone)
    with open_checkpoint(directory) as stored:
        resumed.load_pieces(stored)
        alone.load_pieces(stored)
    assert as_bytes(comm.allgather_obj(resumed.state_dict())[0]) == want
    assert as_bytes(alone.state_dict()) == want


def as_bytes(state: dict) -> dict:
    return {f"{part}/{k}": host(v).tobytes() if hasattr(v, "shape") else v
            for part, named in state.items() for k, v in named.items()}


@shared_verdict
def test_per_rank_capacity_drops_what_each_rank_drops_alone(comm):
    """``capacity="rank"`` (Megatron-LM's and DeepSpeed's): each rank's layer output is its
    tokens routed alone, and the micro-batch's drops are the sum of each rank's; the global
    default drops elsewhere."""
    if comm.size == 1:
        return
    from scratchpar.autograd import Tensor
    from scratchpar.parallel.experts import ExpertGroup, expert_parallel
    spec = nn.Experts(4, 2, 0.5, balance=0.1, z_loss=0.01)
    mesh = Mesh(comm, ep=comm.size if 4 % comm.size == 0 else 1)
    x = np.random.default_rng([3, comm.rank]).standard_normal((2, 5, 8))
    alone = nn.MixtureOfExperts(8, spec, np.random.default_rng(0), dtype=np.float64)
    want = host(alone(Tensor(on_device(x))).data)
    outs, dropped = {}, {}
    for capacity in ("rank", "global"):
        moe = nn.MixtureOfExperts(8, spec, np.random.default_rng(0), dtype=np.float64)
        group = ExpertGroup(mesh.replica_comm.dup(),
                            mesh.ep_comm.dup() if mesh.ep > 1 else None, capacity=capacity)
        expert_parallel(moe, group)
        outs[capacity], dropped[capacity] = host(moe(Tensor(on_device(x))).data), \
            moe.stats["dropped"]
        group.free()
    mesh.free()
    np.testing.assert_allclose(outs["rank"], want, rtol=1e-12, atol=1e-14)
    assert dropped["rank"] == sum(comm.allgather_obj(alone.stats["dropped"]))
    assert any(comm.allgather_obj(not np.allclose(outs["global"], want)))
