"""Data parallelism with its device work captured (``parallel/dp_graph.py``), on real ranks with
a stand-in graph (``tests/graph_helpers.py``): its steps are the bucketed strategy's bit for bit
in float64, dropout's masks included, and the messages it sends after the replay read what the
replay packed."""

import numpy as np
import pytest
from device_helpers import host
from graph_helpers import StandIn
from mpi_helpers import shared_verdict

from scratchpar.device_rng import DeviceRandom
from scratchpar.optim import Adam
from scratchpar.parallel import CapturedDataParallel, DataParallel
from scratchpar.train import make_config
from scratchpar.train.task import build_task

FLAGS = {"mlp": {"model": {"kind": "mlp", "hidden_sizes": (6, 5)},
                 "data": {"source": "classification", "n_features": 4}},
         "gpt, dropout": {"model": {"kind": "gpt", "d_model": 8, "n_heads": 2, "n_layers": 2,
                                    "dropout": 0.3},
                          "data": {"vocab_size": 7, "seq_len": 6}}}


@pytest.mark.parametrize("kind", FLAGS)
@pytest.mark.parametrize("rows", [3, 8])  # fewer rows than 4 ranks: a rank with none
@shared_verdict
def test_captured_steps_are_the_bucketed_steps_bit_for_bit(comm, mesh, kind, rows, monkeypatch):
    monkeypatch.setattr("scratchpar.parallel.dp_graph.Replayed", StandIn)
    cfg = make_config({**FLAGS[kind], "train": {"dtype": "float64"}})
    runs = []
    for cls in (DataParallel, CapturedDataParallel):
        stream = DeviceRandom(0, 1, comm.rank)  # each replica's own masks
        task = build_task(cfg, stream)
        dp = cls(task.model, lambda ps: Adam(ps, lr=0.05), task, mesh, bucket_bytes=256,
                 grad_clip=0.5)  # several buckets, some holding one array alone
        losses = [dp.step(task.batch(step, rows)[0])["loss"] for step in range(4)]
        runs.append((losses, [host(p.data) for p in dp.params], stream.state))
        if cls is CapturedDataParallel:  # ran, captured, then replayed twice
            assert dp.replayed.captures == 1 and not dp.replayed.ran
            assert len(dp.plan) > 2 and any(len(m) == 1 for m in dp.plan.members)
    (want, weights, stream), (got, captured, replayed_stream) = runs
    assert got == want and replayed_stream == stream
    for a, b in zip(captured, weights):
        np.testing.assert_array_equal(a, b)
