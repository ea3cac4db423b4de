"""Measurements attach from outside: a probe hears the moments a step names, changes nothing of
the step, and is refused by a strategy that does not name what it needs."""

import numpy as np
import pytest

from scratchpar.device_rng import DeviceRandom
from scratchpar.optim import SGD
from scratchpar.parallel import SingleDevice
from scratchpar.parallel.ledger import Ledger
from scratchpar.parallel.probe import Probe
from scratchpar.train import make_config
from scratchpar.train.task import build_task


class Heard(Probe):
    """What a user might write: the rows, units and summed squared gradient of each shard."""

    def __init__(self, shards: int):
        self.shards, self.log = shards, []

    def shard(self, rows, units):
        self.log.append([rows, float(units), 0.0])

    def gradient(self, grad):
        self.log[-1][2] += float(np.vdot(grad, grad))

    def report(self, metrics):
        return {"heard": len(self.log)}


def mlp_task():
    cfg = make_config({"model": {"kind": "mlp", "hidden_sizes": (6,)},
                       "data": {"source": "classification", "n_features": 4},
                       "train": {"dtype": "float64"}})
    return build_task(cfg, DeviceRandom(0, 1))


@pytest.mark.parametrize("shards", [1, 2, 3])
def test_a_probe_hears_each_shard_and_the_step_is_unchanged(shards):
    plain, heard = mlp_task(), mlp_task()
    batch, _ = plain.batch(0, 7)
    want = SingleDevice(plain.model, lambda ps: SGD(ps, lr=0.1), plain).step(batch)
    one = SingleDevice(heard.model, lambda ps: SGD(ps, lr=0.1), heard)
    probe = one.attach(Heard(shards))
    got = one.step(batch)
    assert got["loss"] == pytest.approx(want["loss"], rel=1e-12)
    for a, b in zip(heard.model.parameters(), plain.model.parameters()):
        np.testing.assert_allclose(a.data, b.data, rtol=1e-12, atol=1e-15)
    assert got["heard"] == shards
    assert [rows for rows, _, _ in probe.log] == [len(r) for r in np.array_split(range(7), shards)]
    assert sum(units for _, units, _ in probe.log) == 7
    assert all(sq > 0 for _, _, sq in probe.log)


def test_a_probe_that_needs_moments_the_strategy_does_not_name_is_refused():
    task = mlp_task()
    one = SingleDevice(task.model, lambda ps: SGD(ps, lr=0.1), task)
    with pytest.raises(ValueError, match="Ledger hears forward, moment, which SingleDevice"):
        one.attach(Ledger())
    assert not one.probes.attached
