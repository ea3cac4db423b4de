"""The captured step's bookkeeping (``kernels/graph.py``, ``SingleDevice(cuda_graph=True)``) on
the CPU, with a stand-in graph (``tests/graph_helpers.py``)."""

import numpy as np
import pytest
from graph_helpers import StandIn

from scratchpar import backend, double
from scratchpar.backend import BackendError
from scratchpar.device_rng import DeviceRandom
from scratchpar.kernels import graph
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


@pytest.mark.parametrize("kind", ["mlp", "gpt", "gpt, dropout"])
def test_a_captured_step_trains_as_the_plain_step_bit_for_bit(kind, monkeypatch):
    """With dropout, each replay draws the plain step's masks: its stream counts from an
    origin the replay is given, and moves as the plain step moves it."""
    monkeypatch.setattr("scratchpar.parallel.single.Replayed", StandIn)
    flags = ({"model": {"kind": "mlp", "hidden_sizes": (6,)},
              "data": {"source": "classification", "n_features": 4}} if kind == "mlp" else
             {"model": {"kind": "gpt", "d_model": 8, "n_heads": 2, "n_layers": 1,
                        "dropout": 0.3 if "dropout" in kind else 0.0},
              "data": {"vocab_size": 7, "seq_len": 6}})
    cfg = make_config({**flags, "train": {"dtype": "float64"}})
    runs = []
    for captured in (False, True):
        gen = DeviceRandom(0, 1)
        task = build_task(cfg, gen)
        one = SingleDevice(task.model, lambda ps: SGD(ps, lr=0.1), task, grad_clip=0.5,
                           cuda_graph=captured)
        losses = [one.step(task.batch(step, 5)[0])["loss"] for step in range(4)]
        runs.append((losses, [p.data.copy() for p in one.params], gen.state))
        if captured:  # the gradients the update read are the captured arrays, rewritten
            assert one.replayed.captures == 1 and StandIn.launches >= 2
            assert all(p.grad is grad for p, grad in zip(one.params, one.replayed.outputs[2]))
    (plain_losses, plain_params, plain_stream), (losses, params, stream) = runs
    assert losses == plain_losses and stream == plain_stream
    for got, want in zip(params, plain_params):
        np.testing.assert_array_equal(got, want)


def test_a_replay_with_dropout_waits_for_nothing_and_uploads_its_origin_alone(monkeypatch):
    """On the double, a captured GPT step with dropout, after its capture: the stream's
    origin is the one host number the step sends the device, outside the graph; nothing
    waits for the device."""
    monkeypatch.setattr("scratchpar.parallel.single.Replayed", StandIn)
    backend.set_device("double")
    cfg = make_config({"model": {"kind": "gpt", "d_model": 8, "n_heads": 2, "n_layers": 1,
                                 "dropout": 0.3},
                       "data": {"vocab_size": 7, "seq_len": 6}, "train": {"device": "double"}})
    task = build_task(cfg, DeviceRandom(0, 1))
    one = SingleDevice(task.model, lambda ps: SGD(ps, lr=0.1), task, cuda_graph=True)
    for step in range(3):  # as it is, captured, replayed
        batch = task.batch(step, 5)[0]
        with double.watch() as seen:
            one.replayed((batch,))
    assert one.replayed.captures == 1 and not one.replayed.ran
    assert (seen.syncs_from(), seen.scalars, seen.to_device_bytes) == ([], [], 8)
    (copy,) = seen.pageable_copies
    assert copy.startswith("to device at scratchpar/kernels/graph.py:")


def test_a_graph_of_host_arrays_is_refused_at_its_capture_with_a_line():
    """A library user who asks for a captured step off CUDA: the first step runs, the second
    (the capture) says what a graph needs, rather than failing to import CuPy."""
    stream = DeviceRandom(0, 1)
    replayed = graph.Replayed(lambda x: (x * stream.random(x.shape),), stream)
    replayed((np.arange(3.0),))
    assert stream.position == 3
    with pytest.raises(BackendError, match="CUDA graph records CuPy's kernels"):
        replayed((np.arange(3.0),))
    assert stream.position == 3 and stream.origin is None  # the refused step drew nothing
