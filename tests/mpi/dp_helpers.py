"""Tiny models, batches and checks shared by the data-parallel tests on real ranks."""

import hashlib

import numpy as np

from scratchpar import nn
from scratchpar.train.task import Task

VOCAB, SEQ = 7, 5


def make_task(kind: str, seed: int, dtype=np.float64) -> Task:
    """A tiny model of ``kind``, initialized from ``seed`` (no dropout), in its Task."""
    gen = np.random.default_rng(seed)
    if kind == "mlp":
        return Task(None, nn.MLP([5, 7, 4], gen, dtype), "sample")
    if kind == "gpt":
        return Task(None, nn.GPT(VOCAB, SEQ, 8, 2, 1, gen, dtype=dtype), "tok")
    return Task(None, nn.LSTMLanguageModel(VOCAB, 6, 5, gen, dtype), "tok")


def make_batch(kind: str, rows: int, seed: int, dtype=np.float64, pad: bool = True):
    """A global batch: (x, y) for the MLP, ids (rows, SEQ+1) with some padding for the LMs."""
    gen = np.random.default_rng([seed, 7])
    if kind == "mlp":
        return gen.standard_normal((rows, 5)).astype(dtype), gen.integers(0, 4, rows)
    return gen.integers(0 if pad else 1, VOCAB, (rows, SEQ + 1))


def replica_digests(comm, model):
    digest = hashlib.sha256(b"".join(p.data.tobytes() for p in model.parameters())).hexdigest()
    return comm.allgather_obj(digest)


def assert_close(got, want, rtol, atol=0.0):
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
