"""One device's gradient noise scale: the step in two halves is the same step, and its
estimates are the halves' (McCandlish et al. 2018, Appendix A.1)."""

import numpy as np
import pytest

from scratchpar.data.shard import shard
from scratchpar.device_rng import DeviceRandom
from scratchpar.optim import SGD
from scratchpar.optim.noise_scale import NoiseScale, estimate
from scratchpar.parallel import SingleDevice
from scratchpar.parallel.noise import NoiseProbe
from scratchpar.train import make_config
from scratchpar.train.task import build_task

MODELS = {"gpt": {"kind": "gpt", "d_model": 8, "n_heads": 2, "n_layers": 1},
          "mlp": {"kind": "mlp", "hidden_sizes": (12,)}}


def task_of(kind: str):
    data = {"seq_len": 6} if kind == "gpt" else {"source": "classification", "n_features": 5}
    cfg = make_config({"model": MODELS[kind], "data": data, "train": {"dtype": "float64"}})
    return build_task(cfg, DeviceRandom(0, 1))


def halves_sq(task, batch) -> list[float]:
    """Each half's mean gradient, squared norm, on a model of its own."""
    found = []
    for k in range(2):
        half = shard(batch, k, 2)
        task.model.zero_grad()
        task.loss(task.model, half, reduction="sum").backward()
        total = sum(float(np.vdot(p.grad, p.grad)) for p in task.model.parameters()
                    if p.grad is not None)
        found.append(total / float(task.count(half)) ** 2)
    return found


@pytest.mark.parametrize("kind", sorted(MODELS))
@pytest.mark.parametrize("rows", [7, 8])
def test_the_step_in_halves_is_the_step_and_its_estimates_the_halves(kind, rows):
    plain, split, oracle = task_of(kind), task_of(kind), task_of(kind)
    batch, _ = plain.batch(0, rows)
    want = SingleDevice(plain.model, lambda ps: SGD(ps, lr=0.1), plain).step(batch)
    measured = SingleDevice(split.model, lambda ps: SGD(ps, lr=0.1), split)
    measured.attach(NoiseProbe(NoiseScale(decay=0.0)))
    got = measured.step(batch)
    assert got["loss"] == pytest.approx(want["loss"], rel=1e-12)
    assert got["grad_norm"] == pytest.approx(want["grad_norm"], rel=1e-12)
    for a, b in zip(split.model.parameters(), plain.model.parameters()):
        np.testing.assert_allclose(a.data, b.data, rtol=1e-12, atol=1e-15)
    sample = estimate(halves_sq(oracle, batch), [(rows + 1) // 2, rows // 2],
                      want["grad_norm"] ** 2)
    assert got["gradient_sq"] == pytest.approx(sample.gradient_sq, rel=1e-9)
    assert got["gradient_trace"] == pytest.approx(sample.trace, rel=1e-9)
    if sample.gradient_sq > 0:
        assert got["noise_scale"] == pytest.approx(sample.trace / sample.gradient_sq, rel=1e-9)

