"""Local SGD on real ranks: every=1 equals data parallelism, averaging makes replicas equal, and
a checkpoint holds every replica."""

import dp_helpers as dp_cases
import numpy as np
from device_helpers import host
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict

from scratchpar.optim import SGD, Adam
from scratchpar.parallel import DataParallel, LocalSGD
from scratchpar.train.sharded import save_sharded
from scratchpar.train.stored import open_checkpoint

kinds = st.sampled_from(("mlp", "gpt", "lstm"))


@settings(max_examples=6)
@given(kind=kinds, per_rank=st.integers(1, 3), seed=st.integers(0, 2**31))
@shared_verdict
def test_every_step_averaging_equals_data_parallel(comm, mesh, kind, per_rank, seed):
    """Averaging parameters after each step equals averaging gradients before it only for plain
    SGD (no momentum) from identical parameters, with every shard holding as many units: equal
    rows per rank and no padding. Those are the conditions here."""
    local, sync = dp_cases.make_task(kind, seed + comm.rank), dp_cases.make_task(kind, seed)
    lsgd = LocalSGD(local.model, lambda ps: SGD(ps, lr=0.1), local, mesh, every=1)
    dp = DataParallel(sync.model, lambda ps: SGD(ps, lr=0.1), sync, mesh)
    for step in range(3):
        batch = dp_cases.make_batch(kind, per_rank * comm.size, seed + step, pad=False)
        got, want = lsgd.step(batch), dp.step(batch)
        np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-10)
        assert len(set(dp_cases.replica_digests(comm, local.model))) == 1
    dp_cases.assert_close([p.data for p in local.model.parameters()],
                          [p.data for p in sync.model.parameters()], rtol=1e-10, atol=1e-13)


@settings(max_examples=5)
@given(kind=kinds, rows=st.integers(0, 9), every=st.integers(0, 3), warmup=st.integers(0, 2),
       seed=st.integers(0, 2**31))
@shared_verdict
def test_replicas_are_identical_after_warmup_each_averaging_and_finish(comm, mesh, kind, rows,
                                                                       every, warmup, seed):
    task = dp_cases.make_task(kind, seed + comm.rank)
    lsgd = LocalSGD(task.model, lambda ps: SGD(ps, lr=0.1, momentum=0.5), task, mesh,
                    every=every, warmup=warmup)
    for step in range(1, 5):
        lsgd.step(dp_cases.make_batch(kind, rows + 1, seed + step))
        local = step - warmup
        if local <= 0 or (every and local % every == 0):
            assert len(set(dp_cases.replica_digests(comm, task.model))) == 1
    lsgd.finish()
    assert len(set(dp_cases.replica_digests(comm, task.model))) == 1
    state = lsgd.state_dict()
    assert (state is None) == (comm.rank != 0)
    if state is not None:
        assert state["local_sgd"] == {"steps": 4, "world": comm.size, "diverged": False}
        assert not any(part.endswith(".model") for part in state)  # one copy of the model


def make_local_sgd(mesh, kind, seed, optimizer="momentum"):
    """LocalSGD (every=3) over a tiny model initialized from ``seed`` (rank 0's, broadcast)."""
    task = dp_cases.make_task(kind, seed)

    def make_optimizer(params):
        return SGD(params, lr=0.1, momentum=0.5) if optimizer == "momentum" \
            else Adam(params, lr=0.01)

    return LocalSGD(task.model, make_optimizer, task, mesh, every=3)


def through_checkpoint(comm, strategy, tmp_path):
    """``strategy``'s pieces written as the Trainer writes them, then read whole by every rank."""
    directory = comm.allgather_obj(str(tmp_path / "ck"))[0]
    save_sharded(directory, *strategy.pieces(), {"step": 0}, comm)
    with open_checkpoint(directory) as stored:
        return stored.state()


def run(strategy, kind, steps, seed):
    for step in steps:
        strategy.step(dp_cases.make_batch(kind, 5, seed + step))


def arrays_of(strategy):
    """Host copies of the parameters, then of the optimizer buffers, in a fixed order."""
    optim = strategy.optimizer.state_dict()
    return ([host(p.data).copy() for p in strategy.model.parameters()]
            + [host(optim[k]) for k in sorted(optim) if hasattr(optim[k], "shape")])


def assert_bitwise(got, want):
    assert len(got) == len(want)
    for g, w in zip(map(host, got), map(host, want)):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes()


@settings(max_examples=6)
@given(kind=kinds, optimizer=st.sampled_from(("momentum", "adam")), stop=st.integers(1, 5),
       seed=st.integers(0, 2**31))
@shared_verdict
def test_resuming_from_a_checkpoint_continues_the_run_bitwise(comm, mesh, tmp_path, kind, optimizer,
                                                              stop, seed):
    """Stopped mid-period (replicas and optimizer states differ) or at an averaging point.
    Every check waits until the ranks are past their last collective."""
    straight = make_local_sgd(mesh, kind, seed, optimizer)
    run(straight, kind, range(stop + 4), seed)
    first = make_local_sgd(mesh, kind, seed, optimizer)
    run(first, kind, range(stop), seed)
    state = through_checkpoint(comm, first, tmp_path)
    resumed = make_local_sgd(mesh, kind, seed + 1, optimizer)
    resumed.load_state_dict(state)
    loaded = arrays_of(resumed), resumed.steps, resumed.diverged
    run(resumed, kind, range(stop, stop + 4), seed)
    assert first.diverged == (stop % 3 != 0)
    assert loaded[1:] == (first.steps, first.diverged)
    assert_bitwise(loaded[0], arrays_of(first))
    assert_bitwise(arrays_of(resumed), arrays_of(straight))


@settings(max_examples=3)
@given(kind=kinds, seed=st.integers(0, 2**31))
@shared_verdict
def test_another_world_size_loads_the_mean_replica_and_a_whole_optimizer_state(comm, mesh, tmp_path,
                                                                             kind, seed):
    """Checkpoints that say a world of p+1 (one fabricated replica) or p−1 ranks wrote them."""
    p = comm.size
    lsgd = make_local_sgd(mesh, kind, seed)
    run(lsgd, kind, range(2), seed)
    written = through_checkpoint(comm, lsgd, tmp_path)
    bigger = {**written, f"rank{p}.model": {k: 1.5 * v + 0.25 for k, v in
                                                written["model"].items()},
              f"rank{p}.optim": {k: -v if hasattr(v, "shape") else v for k, v in
                                    written["optim"].items()},
              "local_sgd": {**written["local_sgd"], "world": p + 1}}
    cases = [bigger]
    if p > 1:
        smaller = {k: v for k, v in written.items() if not k.startswith(f"rank{p - 1}.")}
        cases.append({**smaller, "local_sgd": {**written["local_sgd"], "world": p - 1}})
    results = []
    for state in cases:
        loaded = make_local_sgd(mesh, kind, seed + 1)
        loaded.load_state_dict(state)
        results.append((loaded, dp_cases.replica_digests(comm, loaded.model)))
    for state, (loaded, digests) in zip(cases, results):
        saved, r = state["local_sgd"]["world"], comm.rank
        assert (loaded.steps, loaded.diverged, len(set(digests))) == (2, False, 1)
        models = [state["model"]] + [state[f"rank{q}.model"] for q in range(1, saved)]
        for name, param in loaded.model.state_dict().items():
            mean = np.mean([m[name] for m in models], axis=0)  # θ = (1/p) Σᵣ θᵣ
            np.testing.assert_allclose(host(param), mean, rtol=1e-14, atol=1e-15)
        source = state[f"rank{r}.optim"] if 0 < r < saved else state["optim"]
        optim = loaded.optimizer.state_dict()
        assert optim.keys() == source.keys()
        assert_bitwise([optim[k] for k in sorted(source) if hasattr(source[k], "shape")],
                       [source[k] for k in sorted(source) if hasattr(source[k], "shape")])


def test_data_parallel_and_local_sgd_checkpoints_load_into_each_other(comm, mesh, tmp_path):
    kind, seed = "mlp", 11
    task = dp_cases.make_task(kind, seed)
    dp = DataParallel(task.model, lambda ps: SGD(ps, lr=0.1, momentum=0.5), task, mesh)
    run(dp, kind, range(2), seed)
    want = arrays_of(dp)
    lsgd = make_local_sgd(mesh, kind, seed + 1)
    lsgd.load_state_dict(through_checkpoint(comm, dp, tmp_path))
    from_dp = arrays_of(lsgd), lsgd.steps, lsgd.diverged
    run(lsgd, kind, range(2), seed)
    state = through_checkpoint(comm, lsgd, tmp_path)
    dp.load_state_dict(state)  # rank 0's replica, at any world size
    assert from_dp[1:] == (0, False)
    assert_bitwise(from_dp[0], want)
    model = dp.model.state_dict()
    assert_bitwise(list(model.values()), [state["model"][k] for k in model])
