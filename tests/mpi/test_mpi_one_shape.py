"""Every exported strategy built the one way, (model, make_optimizer, objective, mesh, …), with
an objective a user writes in a few lines: one step equals one device's step, parameters on
rank 0. The strategies whose ranks step in lockstep run on every rank; the asynchronous ones run
with one worker (beside its server or master), where they are serial SGD, on the first ranks."""

import numpy as np
import pytest
from device_helpers import host, on_device
from mpi_helpers import shared_verdict

from scratchpar import nn, parallel
from scratchpar.autograd import functional as F
from scratchpar.comm.mesh import Mesh
from scratchpar.optim import SGD
from scratchpar.parallel.pipeline import schedules


class Classify:
    """The user's objective: a batch is (x, y); its loss the summed or mean cross-entropy; a
    pipeline also splits the batch and scores the last stage's output."""

    def loss(self, model, batch, reduction):
        x, y = batch
        return F.cross_entropy(model(x), y, reduction=reduction)

    def count(self, batch):
        return len(batch[1])

    def split(self, batch):
        return batch

    def output_loss(self, out, y, reduction):
        return F.cross_entropy(out, y, reduction=reduction)


def sgd(params):
    return SGD(params, lr=0.5)


def lockstep(name, comm):
    """(the strategy's ranks, its mesh's axes) for a strategy every rank steps."""
    size = comm.size
    if name == "Hybrid":
        tp = 2 if size % 2 == 0 else 1
        return size, {"pp": size // tp, "tp": tp}
    return size, {"pp": size} if name in ("Pipeline", "PipeDream") else {}


KNOBS = {"LocalSGD": {"every": 1}, "Pipeline": {}, "Hybrid": {},
         "PipeDream": {"schedule": None}, "SyncEASGD": {"rho": 0.0, "tau": 1},
         "AsyncEASGD": {"rho": 0.0, "tau": 1}, "RoundRobinEASGD": {"rho": 0.0},
         "SSPParameterServer": {"staleness": 1}, "SyncThenAsync": {"warmup": 0}}
LOCKSTEP = ["DataParallel", "CapturedDataParallel", "DataParallelNaive", "LocalSGD", "ZeRO1",
            "ZeRO2", "ZeRO3", "Pipeline", "PipeDream", "Hybrid", "SyncParameterServer"]
ALONE = ["Hogwild", "LockedHogwild", "SyncEASGD"]  # one rank: one worker
PAIRED = ["AsyncParameterServer", "LockedParameterServer", "SSPParameterServer",
          "SyncThenAsync", "AsyncEASGD", "RoundRobinEASGD"]  # a server or master, one worker


def test_every_exported_strategy_is_here():
    exported = {n for n in parallel.__all__ if isinstance(getattr(parallel, n), type)
                and issubclass(getattr(parallel, n), parallel.strategy.Strategy)}
    assert exported == set(LOCKSTEP + ALONE + PAIRED) | {"SingleDevice"}


@pytest.mark.parametrize("name", LOCKSTEP + ALONE + PAIRED)
@shared_verdict
def test_one_step_built_the_one_way_equals_one_device(comm, name):
    ranks = 1 if name in ALONE else 2 if name in PAIRED else comm.size
    if name == "SyncParameterServer":
        ranks = max(comm.size, 2)
    if ranks > comm.size:
        pytest.skip(f"{name} needs {ranks} ranks")
    group = comm.split(int(comm.rank < ranks), name="shape")
    try:
        if comm.rank < ranks:
            stepped(group, name)
    finally:
        group.free()


def stepped(group, name):
    """One step of strategy ``name`` over ``group``, held against one device's on rank 0."""
    gen = np.random.default_rng(3)
    batch = (on_device(gen.standard_normal((12, 3))), on_device(gen.integers(0, 2, 12)))
    sizes = [3, 8, 8, 8, 2]
    model, one = (nn.MLP(sizes, np.random.default_rng(5), np.float64) for _ in range(2))
    knobs = dict(KNOBS.get(name, {}))
    axes = {}
    if name in LOCKSTEP:
        _, axes = lockstep(name, group)
    if name == "PipeDream":  # one micro-batch: its per-micro-batch update is the step
        knobs["schedule"] = schedules.build("pipedream", axes["pp"], 1)
    mesh = Mesh(group, **axes)
    strategy = getattr(parallel, name)(model, sgd, Classify(), mesh, **knobs)
    try:
        strategy.step(batch)
        strategy.shutdown()
        state = strategy.state_dict()
    finally:
        strategy.close()
        mesh.free()
    parallel.SingleDevice(one, sgd, Classify()).step(batch)
    if group.rank == 0:
        worker = 1 if name in PAIRED else 0  # EASGD's centre is "model"; its worker's moved
        got = state.get(f"rank{worker}.model", state["model"])
        for key, want in one.state_dict().items():
            np.testing.assert_allclose(host(got[key]), host(want), rtol=1e-10, atol=1e-13,
                                       err_msg=f"{name}: {key}")
