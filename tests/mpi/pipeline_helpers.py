"""Models deep enough to split, batches, and a pipeline over a dp × pp mesh of the world, shared
by the pipeline tests on real ranks; and the steps and state of a strategy against one device."""

import numpy as np
from device_helpers import host, on_device
from hypothesis import strategies as st

from scratchpar import nn
from scratchpar.comm.mesh import Mesh
from scratchpar.optim import SGD, Adam
from scratchpar.parallel.hybrid import Hybrid
from scratchpar.parallel.pipeline import PipeDream, Pipeline, partition, schedules
from scratchpar.parallel.pipeline.partition import parameter_counts
from scratchpar.train.task import Task

VOCAB, SEQ = 7, 5
KINDS = ("mlp", "gpt", "tied", "lstm")


def make_task(kind: str, seed: int, dtype=np.float64, depth: int = 4) -> Task:
    """A small model of ``kind`` whose ``pipeline_layers()`` are ``depth`` (≥ 3) layers,
    initialized from ``seed``."""
    gen = np.random.default_rng(seed)
    if kind == "mlp":
        return Task(None, nn.MLP([5, *range(7, 7 + depth - 1), 4], gen, dtype), "sample")
    if kind in ("gpt", "tied"):
        return Task(None, nn.GPT(VOCAB, SEQ, 8, 2, depth - 2, gen, dtype=dtype,
                                 tie_embeddings=kind == "tied"), "tok")
    return Task(None, nn.LSTMLanguageModel(VOCAB, 6, 5, gen, dtype, n_layers=depth - 2), "tok")


def make_batch(kind: str, rows: int, seed: int, dtype=np.float64):
    gen = np.random.default_rng([seed, 11])
    if kind == "mlp":
        return on_device(gen.standard_normal((rows, 5)), dtype), on_device(gen.integers(0, 4, rows))
    return on_device(gen.integers(0, VOCAB, (rows, SEQ + 1)))


def make_optimizer(adam: bool):
    def build(params):
        return Adam(params, lr=0.01) if adam else SGD(params, lr=0.1, momentum=0.9)
    return build


def same_steps(strategy, single, rows: int, width: int, vocab: int, seed: int, steps: int = 3):
    """``steps`` steps of ``strategy`` and of ``single`` on the same batches of token ids (step
    s: ``rows`` + s rows of ``width`` + 1): their losses and gradient norms agree to 1e-10."""
    for step in range(steps):
        batch = on_device(np.random.default_rng([seed, step]).integers(1, vocab,
                                                                        (rows + step, width + 1)))
        got, want = strategy.step(batch), single.step(batch)
        np.testing.assert_allclose([got["loss"], got["grad_norm"]],
                                   [want["loss"], want["grad_norm"]], rtol=1e-10)


def same_state(comm, strategy, model, atol: float) -> None:
    """``strategy``'s whole state, gathered on rank 0, holds ``model``'s weights (rtol 1e-9)."""
    state = strategy.state_dict()
    if comm.rank == 0:
        for name, w in model.named_parameters():
            np.testing.assert_allclose(host(state["model"][name]), host(w.data), rtol=1e-9,
                                       atol=atol, err_msg=name)


LIVE: list = []  # how to free the last pipeline and mesh: MPI has a few thousand communicators


def free_last() -> None:
    """Free the last strategy and mesh built: every rank builds them in the same order, so
    frees them alike."""
    while LIVE:
        LIVE.pop()()


def draw_cp(data, size: int, least: int = 1) -> int:
    """A cp of at least ``least`` that divides ``size`` ranks, drawn by hypothesis."""
    return data.draw(st.sampled_from([c for c in range(least, size + 1) if size % c == 0]),
                     label="cp")


def make_pipeline(comm, task, schedule: str, pp: int, m: int, v: int = 1, adam=False,
                  clip=0.0, bucket_bytes=1 << 20, optimizer=None):
    """The pipeline strategy of ``schedule`` on a (world/pp) × pp mesh; ``optimizer(params)``
    builds the stage's optimizer (default: Adam or SGD with momentum)."""
    free_last()
    mesh = Mesh(comm, dp=comm.size // pp, pp=pp)
    cls = PipeDream if schedule == "pipedream" else Pipeline
    pipe = cls(task.model, optimizer or make_optimizer(adam), task, mesh,
               schedule=schedules.build(schedule, pp, m, v), grad_clip=clip,
               bucket_bytes=bucket_bytes)  # ranges: balanced by parameter count
    LIVE.extend([mesh.free, pipe.close])
    return pipe


def make_hybrid(comm, task, schedule: str, dp: int, pp: int, tp: int, m: int, adam=False,
                clip=0.0, sequence_parallel: bool = False):
    """The synchronous pipeline of ``schedule`` on a dp × pp × tp mesh, each stage this rank's
    tensor-parallel shard of ``task.model`` (which is left as it was)."""
    free_last()
    mesh = Mesh(comm, dp=dp, pp=pp, tp=tp)
    ranges = partition(parameter_counts(task.model.pipeline_layers()), pp)  # alike on every rank
    pipe = Hybrid(task.model, make_optimizer(adam), task, mesh,
                  schedule=schedules.build(schedule, pp, m, 1), ranges=ranges,
                  sequence_parallel=sequence_parallel, grad_clip=clip)
    LIVE.extend([mesh.free, pipe.close])
    return pipe
