"""The asynchronous parameter servers on real ranks: the properties that fit them (DESIGN.md §3).

One worker in any mode is serial SGD, bitwise; SSP with τ = 0 (and a warm-up longer than the
run) is the synchronous spec, update for update; no push is ever lost, in any mode, with a
worker slowed or leaving early; and every staleness a server measures is at most τ.
"""

import time

import numpy as np
import pytest
from device_helpers import host
from dp_helpers import make_batch, make_task
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict

from scratchpar.comm.chunks import bounds
from scratchpar.data.shard import Part
from scratchpar.optim import SGD, Adam
from scratchpar.parallel import SingleDevice
from scratchpar.parallel.ps import (
    AsyncParameterServer,
    LockedParameterServer,
    SSPParameterServer,
    SyncParameterServer,
    SyncThenAsync,
)

LIVE: list = []  # the last strategies' communicators, freed before the next are built
MODES = {"sync": (SyncParameterServer, {}), "locked": (LockedParameterServer, {}),
         "async": (AsyncParameterServer, {}), "ssp0": (SSPParameterServer, {"staleness": 0}),
         "ssp2": (SSPParameterServer, {"staleness": 2}), "warmup": (SyncThenAsync, {"warmup": 2})}
AGGREGATING = ("sync", "ssp0", "ssp2", "warmup")  # the servers agree on a clock's norm


def optimizer(adam: bool):
    return lambda params: Adam(params, lr=0.01) if adam else SGD(params, lr=0.1, momentum=0.9)


class Slowed:
    """``task``'s objective, sleeping ``slow`` s before each loss."""

    def __init__(self, task, slow: float):
        self.task, self.slow = task, slow

    def loss(self, model, batch, reduction):
        time.sleep(self.slow)
        return self.task.loss(model, batch, reduction)

    def count(self, batch):
        return self.task.count(batch)


def build(comm, mesh, mode: str, task, servers: int, adam=False, clip=0.0, slow=0.0, **knobs):
    """A parameter server of ``mode`` over ``task``; its first worker sleeps ``slow`` s a step."""
    if comm.size < 2:
        pytest.skip("a parameter server needs a server and a worker")
    cls, kwargs = MODES[mode]
    objective = Slowed(task, slow) if slow and comm.rank == servers else task
    ps = cls(task.model, optimizer(adam), objective, mesh, servers=servers, grad_clip=clip,
             **{**kwargs, **knobs})
    LIVE.append(ps.close)
    return ps


def fresh() -> None:
    while LIVE:
        LIVE.pop()()


def end(ps) -> dict | None:
    """Shut the protocol down (the spec has nothing to shut): server 0's report."""
    return ps.shutdown() if hasattr(ps, "shutdown") else None


def whole(ps) -> list:
    """The servers' parameters, joined on rank 0 (``None`` elsewhere)."""
    state = ps.state_dict()
    return None if state is None else [host(v) for v in state["model"].values()]


@settings(max_examples=16)
@given(mode=st.sampled_from(sorted(MODES)), kind=st.sampled_from(("mlp", "gpt")),
       adam=st.booleans(), clip=st.sampled_from((0.0, 0.3)),
       dtype=st.sampled_from((np.float64, np.float32)), seed=st.integers(0, 2**31))
@shared_verdict
def test_one_worker_in_any_mode_is_serial_sgd_bitwise(comm, mesh, mode, kind, adam, clip,
                                                      dtype, seed):
    """Every server but one worker: each push is applied, on the parameters it was computed
    from, in step order, in the model's own precision. (Where the servers agree on a clock's
    norm, a clipped step's norm is summed in another order than one device's, so clipping is
    off there.)"""
    clip = 0.0 if mode in AGGREGATING else clip
    fresh()
    mine, one = make_task(kind, seed, dtype), make_task(kind, seed, dtype)
    ps = build(comm, mesh, mode, mine, comm.size - 1, adam, clip)
    single = SingleDevice(one.model, optimizer(adam), one, grad_clip=clip)
    losses = []
    for step in range(4):
        batch = make_batch(kind, 3 + step, seed + step, dtype)
        losses.append((ps.step(batch)["loss"], single.step(batch)["loss"]))
    report = end(ps)
    got = whole(ps)
    want = [host(p.data) for p in one.model.parameters()]
    if not ps.is_server and mode != "locked":  # a locked worker holds the last grant's
        for p, w in zip(mine.model.parameters(), want):
            assert np.array_equal(host(p.data), w)
    if got is not None:
        for g, w in zip(got, want):
            assert np.array_equal(g, w), f"{mode}: {np.abs(g - w).max()}"
        np.testing.assert_allclose(*zip(*losses), rtol=1e-13 if dtype == np.float64 else 1e-6)
    if report is not None:
        assert report["pushes"] == report["version"] == 4
        assert report["staleness_histogram"] == {0: 4}


@settings(max_examples=8)
@given(servers=st.integers(1, 2), mode=st.sampled_from(("ssp0", "warmup")),
       kind=st.sampled_from(("mlp", "gpt")), adam=st.booleans(),
       clip=st.sampled_from((0.0, 0.3)), seed=st.integers(0, 2**31))
@shared_verdict
def test_zero_staleness_is_the_synchronous_server_update_for_update(comm, mesh, servers, mode,
                                                                     kind, adam, clip, seed):
    """SSP with τ = 0, and sync-then-async within its warm-up, against the lockstep spec on
    the same split: the same ranges, bitwise, and the same losses, after three steps."""
    fresh()
    servers = min(servers, comm.size - 1) if comm.size > 1 else 1
    spec_task, task = make_task(kind, seed), make_task(kind, seed)
    spec = build(comm, mesh, "sync", spec_task, servers, adam, clip)
    ps = build(comm, mesh, mode, task, servers, adam, clip,
               **({"warmup": 3} if mode == "warmup" else {}))
    pairs = []
    for step in range(3):
        batch = make_batch(kind, spec.workers + step, seed + step)
        pairs.append((spec.step(batch)["loss"], ps.step(batch)["loss"]))
    report = end(ps)
    if ps.is_server:
        assert np.array_equal(ps.flat.data, spec.flat.data)
        np.testing.assert_allclose(*zip(*pairs), rtol=1e-12)
    if report is not None:
        assert report["version"] == 3 and report["pushes"] == 3 * ps.workers
        assert set(report["staleness_histogram"]) == {0}


def run_slowed(comm, mesh, mode: str, steps: int, knobs: dict,
               leave_after: int | None = None):
    """``steps`` steps of ``mode`` on the GPT, the first worker slowed (it sleeps 3 ms a step)
    and, if ``leave_after``, leaving after that many: (the strategy, server 0's report, every
    worker's count of pushes)."""
    fresh()
    ps = build(comm, mesh, mode, make_task("gpt", 5), 1, slow=0.003, **knobs)
    first = not ps.is_server and comm.rank == ps.servers
    for step in range(steps if leave_after is None or not first else leave_after):
        ps.step(make_batch("gpt", 2 * ps.workers, step))
    report = end(ps)
    pushes = comm.allgather_obj(None if ps.is_server else ps.role.pushes)
    return ps, report, [n for n in pushes if n is not None]


@settings(max_examples=10)
@given(mode=st.sampled_from(("locked", "async", "ssp0", "ssp2", "warmup")),
       n_push=st.integers(1, 3), n_fetch=st.integers(1, 2))
@shared_verdict
def test_no_push_is_lost_and_no_staleness_exceeds_tau_under_a_slow_worker(comm, mesh, mode,
                                                                          n_push, n_fetch):
    knobs = {"n_push": n_push, "n_fetch": n_fetch} if mode in ("async", "warmup") else {}
    ps, report, pushes = run_slowed(comm, mesh, mode, 7, knobs)
    if report is None:
        return
    assert report["pushes"] == sum(pushes)  # and each server checked it, worker by worker
    rule = [ps.pushes_at(k) for k in range(7)]  # then the rest on leaving
    assert pushes == [sum(rule) + (not rule[-1])] * ps.workers
    bound = {"locked": 0, "ssp0": 0, "ssp2": 2}.get(mode)
    if bound is not None:
        assert max(report["staleness_histogram"]) <= bound, report["staleness_histogram"]
    if mode.startswith("ssp"):
        assert report["version"] == 7  # one update per clock
    if mode == "locked":
        assert report["version"] == report["pushes"]


@settings(max_examples=6)
@given(mode=st.sampled_from(sorted(MODES.keys() - {"sync"})))
@shared_verdict
def test_a_worker_leaving_early_leaves_the_rest_training(comm, mesh, mode):
    """The first worker leaves after 2 of 6 steps: the servers serve the others to the end, and
    every push of every worker is applied once."""
    ps, report, pushes = run_slowed(comm, mesh, mode, 6, {}, leave_after=2)
    if report is None:
        return
    assert sorted(pushes) == sorted([2] + [6] * (ps.workers - 1))
    assert report["pushes"] == sum(pushes)
    if mode.startswith("ssp"):  # a clock for each step someone was still there to take
        assert report["version"] == (6 if ps.workers > 1 else 2)


def cut(batch, start: int, stop: int):
    """Rows ``start … stop`` of ``batch``, an array or a tuple of arrays."""
    return tuple(a[start:stop] for a in batch) if isinstance(batch, tuple) else batch[start:stop]


DETERMINED = ("sync", "ssp0", "warmup")  # two steps whose updates no arrival order changes


@settings(max_examples=8)
@given(mode=st.sampled_from(sorted(MODES)), kind=st.sampled_from(("mlp", "gpt")),
       extra=st.integers(0, 4), seed=st.integers(0, 2**31))
@shared_verdict
def test_handed_its_rows_alone_a_rank_steps_alike_and_reports_the_units(comm, mesh, mode, kind,
                                                                       extra, seed):
    """A worker reads its share of the batch, a server none (``rows``). Handed only those (a
    Part), every rank steps as handed the whole batch, and reports the units the loop did not
    draw: a server its clock's over every worker, a worker the same where the servers tell it
    (sync), else its own."""
    fresh()
    runs = []
    for part in (False, True):
        task = make_task(kind, seed)
        ps = build(comm, mesh, mode, task, 1)
        size = ps.workers + extra
        start, stop = ps.rows(size)
        metrics = []
        for step in range(2):
            batch = make_batch(kind, size, seed + step)
            metrics.append(ps.step(Part(cut(batch, start, stop), start, stop, size) if part
                                   else batch))
        end(ps)
        runs.append((metrics, whole(ps)))
        if part:
            everyone = float(task.count(batch))
            mine = everyone if ps.is_server or mode == "sync" else \
                float(task.count(cut(batch, start, stop)))
            assert metrics[-1]["units"] == mine
    (whole_metrics, whole_state), (part_metrics, part_state) = runs
    assert all("units" not in m for m in whole_metrics)
    if ps.is_server:
        assert (start, stop) == (0, 0)
    else:
        assert (start, stop) == bounds(size, ps.workers)[comm.rank - ps.servers]
    if mode in DETERMINED or ps.workers == 1:  # a clock's loss sums in arrival order
        for got, want in zip(part_metrics, whole_metrics):
            assert got["loss"] == pytest.approx(want["loss"], rel=1e-12, nan_ok=True)
            assert {k: v for k, v in got.items() if k not in ("loss", "units", "wait_s", "busy")} \
                == {k: v for k, v in want.items() if k not in ("loss", "wait_s", "busy")}
        if whole_state is not None:
            for g, w in zip(part_state, whole_state):
                assert np.array_equal(g, w)
