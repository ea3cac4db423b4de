"""A tensor-parallel shard keeps the share of the model's activations that the memory estimate
gives it (``memory_models.tensor_share``): the traced peak of its forward and backward against the
whole model's, on pairs of ranks, within 6%. The share is the blocks'; the parts outside
them (the embedding, the head, backward's widest moment) have shares of their own."""

import numpy as np
import pytest

from scratchpar.device_rng import DeviceRandom
from scratchpar.parallel.tensor import tensor_parallel
from scratchpar.peak import peak_bytes
from scratchpar.train import make_config
from scratchpar.train.memory_models import tensor_share
from scratchpar.train.task import build_task


def peak(model, loss_of, inputs, targets) -> int:
    """Bytes held at the peak of one forward and backward (``scratchpar.peak``), after one
    unmeasured (the collectives' scratch and the caches are made then)."""
    model.zero_grad()
    loss_of(model(inputs), targets, reduction="sum").backward()
    model.zero_grad()
    with peak_bytes() as seen:
        loss_of(model(inputs), targets, reduction="sum").backward()
    return seen.bytes


@pytest.mark.parametrize("sp", [False, True])
def test_a_shard_keeps_its_share_of_the_model_s_activations(comm, sp):
    pair = comm.split(comm.rank // 2, name="pairs")
    if pair.size == 2:  # a rank past the last pair has no shard to measure
        cfg = make_config({"model": {"kind": "gpt", "d_model": 64, "n_heads": 4, "n_layers": 3},
                           "data": {"seq_len": 64, "vocab_size": 64, "order": 1},
                           "train": {"strategy": "hybrid", "tp": 2, "sequence_parallel": sp,
                                     "batch_size": 16}}, world_size=2)
        task = build_task(cfg, DeviceRandom(0, 1, 0))
        inputs, targets = task.split(task.batch(0, 16)[0])
        whole = peak(task.model, task.output_loss, inputs, targets)
        shard = tensor_parallel(task.model, pair, sp)
        part = peak(shard, getattr(shard, "output_loss", task.output_loss), inputs, targets)
        np.testing.assert_allclose(part / whole, tensor_share(cfg, 2), rtol=0.06)
    pair.free()
