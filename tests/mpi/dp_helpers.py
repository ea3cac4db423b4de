"""Tiny models, batches and checks shared by the data-parallel tests on real ranks.

Models and batches live on the test's device (``backend.to_device``); checks read them on the
host."""

import hashlib

import numpy as np
from device_helpers import host, on_device

from scratchpar import nn
from scratchpar.backend import get_array_module
from scratchpar.train.task import Task

VOCAB, SEQ = 7, 5


def make_task(kind: str, seed: int, dtype=np.float64, tied: bool = False) -> Task:
    """A tiny model of ``kind``, initialized from ``seed`` (no dropout), in its Task; ``tied``:
    the GPT's head is its token embedding."""
    gen = np.random.default_rng(seed)
    if kind == "mlp":
        return Task(None, nn.MLP([5, 7, 4], gen, dtype), "sample")
    if kind == "gpt":
        return Task(None, nn.GPT(VOCAB, SEQ, 8, 2, 1, gen, dtype=dtype, tie_embeddings=tied), "tok")
    return Task(None, nn.LSTMLanguageModel(VOCAB, 6, 5, gen, dtype), "tok")


def make_batch(kind: str, rows: int, seed: int, dtype=np.float64, pad: bool = True):
    """A global batch on the device: (x, y) for the MLP, ids (rows, SEQ+1) with some padding
    for the LMs."""
    gen = np.random.default_rng([seed, 7])
    if kind == "mlp":
        return on_device(gen.standard_normal((rows, 5)), dtype), on_device(gen.integers(0, 4, rows))
    return on_device(gen.integers(0 if pad else 1, VOCAB, (rows, SEQ + 1)))


def replica_digests(comm, model):
    digest = hashlib.sha256(b"".join(host(p.data).tobytes() for p in model.parameters()))
    return comm.allgather_obj(digest.hexdigest())


def assert_close(got, want, rtol, atol=0.0):
    for g, w in zip(got, want):
        np.testing.assert_allclose(host(g), host(w), rtol=rtol, atol=atol)


def everywhere(comm, state):
    """Rank 0's ``state_dict()`` (the others return ``None``) on every rank, to compare there."""
    return comm.allgather_obj(state)[0]


def snapshot(state: dict) -> dict:
    """A copy of a strategy's ``state_dict()`` (its arrays are live: the next step moves them)."""
    return {part: {k: v.copy() if hasattr(v, "copy") else v for k, v in values.items()}
            for part, values in state.items()}


def assert_same_state(state: dict, want: dict) -> None:
    """A whole-model checkpoint equals one device's: the same model and optimizer keys, every
    value close (Adam divides rounding-level gradients, exactly 0 on one device, by √v + ε:
    hence the absolute tolerance)."""
    for part in ("model", "optim"):
        assert state[part].keys() == want[part].keys()
        for key, value in want[part].items():
            np.testing.assert_allclose(host(state[part][key]), host(value), rtol=1e-9,
                                       atol=1e-10, err_msg=f"{part} {key}")


def mean_backward(task, batch):
    """Backpropagate the batch's summed loss and scale the gradient by 1/N after backward, N
    its units, as one device does: the mean loss, which this returns."""
    loss = task.loss(task.model, batch, "sum")
    loss.backward()
    xp = get_array_module(loss.data)
    scale = 1.0 / xp.maximum(xp.asarray(task.count(batch), dtype="float64"), 1.0)
    for p in task.model.parameters():
        if p.grad is not None:
            p.grad *= scale
    return loss.data * scale
