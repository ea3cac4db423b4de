"""The captured step's bookkeeping (``kernels/graph.py``, ``SingleDevice(cuda_graph=True)``) on
the CPU, with a stand-in graph (``tests/graph_helpers.py``)."""

import numpy as np
import pytest
from graph_helpers import StandIn

from scratchpar.device_rng import DeviceRandom
from scratchpar.optim import SGD
from scratchpar.parallel import SingleDevice
from scratchpar.train import make_config
from scratchpar.train.task import build_task


def test_new_shapes_run_as_they_are_then_capture_then_replay(monkeypatch):
    calls = []

    def work(x):
        calls.append(x.shape)
        return (x * 2,)

    replayed = StandIn(work)
    a, b = np.arange(3.0), np.arange(4.0)
    first = replayed((a,))
    assert replayed.captures == 0 and calls == [(3,)]  # the first sight runs as it is
    second = replayed((a + 1,))
    assert replayed.captures == 1 and np.array_equal(second[0], (a + 1) * 2)
    third = replayed((a + 5,))
    assert third[0] is second[0] and np.array_equal(third[0], (a + 5) * 2)  # the same array
    assert first[0] is not second[0]
    replayed((b,))  # new shapes: as they are, then captured again at the next call
    assert replayed.captures == 1
    replayed((b,), ())
    assert replayed.captures == 2
    replayed((b,), (1024.0,))  # a new number its kernels take: as it is again
    assert replayed.captures == 2


@pytest.mark.parametrize("kind", ["mlp", "gpt"])
def test_a_captured_step_trains_as_the_plain_step_bit_for_bit(kind, monkeypatch):
    monkeypatch.setattr("scratchpar.parallel.single.Replayed", StandIn)
    flags = ({"model": {"kind": "mlp", "hidden_sizes": (6,)},
              "data": {"source": "classification", "n_features": 4}} if kind == "mlp" else
             {"model": {"kind": "gpt", "d_model": 8, "n_heads": 2, "n_layers": 1},
              "data": {"vocab_size": 7, "seq_len": 6}})
    cfg = make_config({**flags, "train": {"dtype": "float64"}})
    runs = []
    for captured in (False, True):
        task = build_task(cfg, DeviceRandom(0, 1))
        one = SingleDevice(task.model, lambda ps: SGD(ps, lr=0.1), task, grad_clip=0.5,
                           cuda_graph=captured)
        losses = [one.step(task.batch(step, 5)[0])["loss"] for step in range(4)]
        runs.append((losses, [p.data.copy() for p in one.params]))
        if captured:  # the gradients the update read are the captured arrays, rewritten
            assert one.replayed.captures == 1 and StandIn.launches >= 2
            assert all(p.grad is grad for p, grad in zip(one.params, one.replayed.outputs[2]))
    (plain_losses, plain_params), (losses, params) = runs
    assert losses == plain_losses
    for got, want in zip(params, plain_params):
        np.testing.assert_array_equal(got, want)
