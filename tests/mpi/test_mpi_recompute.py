"""Every strategy that recomputes gives the bits it gives keeping its activations, on every
rank: data parallelism (the gradients reach the buckets through the same hooks, in the same
sums), ZeRO (stage 3 gathers a recomputed layer's parameters for its backward as for any),
pipelines (each chunk re-materialized from its stashed input, zero-bubble's W included),
tensor-parallel stages (the recomputed forward's collectives run again alike), and the
strategies whose workers step a whole model of their own (local SGD, EASGD, the parameter
servers, Hogwild)."""

import numpy as np
import pipeline_helpers as pipelined
import pytest
from device_helpers import host
from dp_helpers import make_batch
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict

from scratchpar import nn
from scratchpar.comm.mesh import Mesh
from scratchpar.device_rng import DeviceRandom
from scratchpar.nn.recompute import chosen, recompute
from scratchpar.optim import SGD, AdamW
from scratchpar.parallel import DataParallel, DataParallelNaive, Hogwild, Hybrid, LocalSGD
from scratchpar.parallel.easgd import RoundRobinEASGD, SyncEASGD
from scratchpar.parallel.pipeline import PipeDream, Pipeline, partition, schedules
from scratchpar.parallel.pipeline.partition import parameter_counts
from scratchpar.parallel.ps import SyncParameterServer
from scratchpar.parallel.zero import STAGES
from scratchpar.train.task import Task

VOCAB, SEQ = 7, 5
MODES = ["full", "selective"]


def gpt(seed: int, blocks: int, stream: int) -> Task:
    """A GPT with dropout 0.3, its masks from ``stream`` of ``seed``."""
    task = Task(None, nn.GPT(VOCAB, SEQ, 8, 2, blocks, np.random.default_rng(seed), dropout=0.3),
                "tok")
    nn.set_dropout_generator(task.model, DeviceRandom(seed, stream))
    return task


def bits(strategy, batches) -> list[bytes]:
    """The gradients this rank holds after stepping ``batches``, and the whole state (weights
    and Adam's moments, which the gradients wrote) as the strategy gathers it."""
    for batch in batches:
        strategy.step(batch)
    state = strategy.state_dict() or {}  # gathered on rank 0
    grads = [host(p.grad).tobytes() for p in strategy.params if p.grad is not None]
    return grads + [host(v).tobytes() for part in ("model", "optim")
                    for _, v in sorted(state.get(part, {}).items()) if hasattr(v, "shape")]


def adamw(params):
    return AdamW(params, 1e-2)


def data_parallel(mesh, cls, seed: int, mode: str, bucket_bytes: int):
    task = gpt(seed, 2, mesh.world.rank)
    recompute(chosen(task.model, mode))
    knobs = {"bucket_bytes": bucket_bytes} if cls is DataParallel else {}
    dp = cls(task.model, adamw, task, mesh, **knobs)
    return bits(dp, [make_batch("gpt", 6, seed + step) for step in range(2)])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("cls", [DataParallel, DataParallelNaive])
@settings(max_examples=3)
@given(seed=st.integers(0, 2**31), bucket_bytes=st.integers(64, 4000))
@shared_verdict
def test_data_parallel_recomputed_gives_the_same_bits(mesh, cls, mode, seed, bucket_bytes):
    assert data_parallel(mesh, cls, seed, mode, bucket_bytes) == \
        data_parallel(mesh, cls, seed, "none", bucket_bytes)


def zero(mesh, stage: int, seed: int, mode: str):
    task = gpt(seed, 2, mesh.world.rank)
    recompute(chosen(task.model, mode))
    strategy = STAGES[stage](task.model, adamw, task, mesh, bucket_bytes=512)
    try:
        return bits(strategy, [make_batch("gpt", 6, seed + step) for step in range(2)])
    finally:
        strategy.close()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stage", [1, 2, 3])
@settings(max_examples=2)
@given(seed=st.integers(0, 2**31))
@shared_verdict
def test_zero_recomputed_gives_the_same_bits(mesh, stage, mode, seed):
    assert zero(mesh, stage, seed, mode) == zero(mesh, stage, seed, "none")


def pipeline(comm, schedule: str, v: int, seed: int, mode: str):
    p = comm.size
    task = gpt(seed, max(2, p * v - 2), comm.rank)
    mesh = Mesh(comm, dp=1, pp=p)
    ranges = partition(parameter_counts(task.model.pipeline_layers()), p * v)
    cls = PipeDream if schedule == "pipedream" else Pipeline
    pipe = cls(task.model, adamw, task, mesh, schedule=schedules.build(schedule, p, 2 * p, v),
               ranges=ranges, recompute=mode)
    try:
        return bits(pipe, [pipelined.make_batch("gpt", 4 * p, seed + step) for step in range(2)])
    finally:
        pipe.close()
        mesh.free()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("schedule, v", [("gpipe", 1), ("1f1b", 1), ("zb-h1", 1),
                                         ("interleaved", 2), ("pipedream", 1)])
@settings(max_examples=2)
@given(seed=st.integers(0, 2**31))
@shared_verdict
def test_pipeline_recomputed_gives_the_same_bits(comm, schedule, v, mode, seed):
    """Every rank a stage; ``full`` re-materializes each chunk from the input it stashed
    (PipeDream's on the weights its forward stashed, updates since notwithstanding)."""
    assert pipeline(comm, schedule, v, seed, mode) == pipeline(comm, schedule, v, seed, "none")


def hybrid(comm, sequence_parallel: bool, seed: int, mode: str):
    tp = 2 if comm.size % 2 == 0 else 1
    pp = comm.size // tp
    task = gpt(seed, max(2, pp), comm.rank // tp)  # a tp group draws one stream
    mesh = Mesh(comm, dp=1, pp=pp, tp=tp)
    ranges = partition(parameter_counts(task.model.pipeline_layers()), pp)
    pipe = Hybrid(task.model, adamw, task, mesh, schedule=schedules.build("1f1b", pp, 2, 1),
                  ranges=ranges, sequence_parallel=sequence_parallel, recompute=mode)
    try:
        return bits(pipe, [pipelined.make_batch("gpt", 4, seed + step) for step in range(2)])
    finally:
        pipe.close()
        mesh.free()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sequence_parallel", [False, True])
@settings(max_examples=2)
@given(seed=st.integers(0, 2**31))
@shared_verdict
def test_tensor_parallel_stages_recomputed_give_the_same_bits(comm, sequence_parallel, mode,
                                                              seed):
    """tp 2 where the world is even: the recomputed forward's all-reduces (or all-gathers and
    reduce-scatters) and its heads' dropout run again, alike on both ranks."""
    assert hybrid(comm, sequence_parallel, seed, mode) == \
        hybrid(comm, sequence_parallel, seed, "none")


WHOLE = {  # a strategy whose ranks each run a whole model, from (mesh, task)
    "local-sgd": lambda mesh, task: LocalSGD(task.model, adamw, task, mesh, every=1),
    "easgd": lambda mesh, task: SyncEASGD(task.model, adamw, task, mesh, rho=0.5, tau=1),
    "easgd-round-robin": lambda mesh, task: RoundRobinEASGD(task.model, adamw, task, mesh,
                                                            rho=0.5),
    "ps": lambda mesh, task: SyncParameterServer(task.model, adamw, task, mesh),
    "hogwild": lambda mesh, task: Hogwild(  # on a rank of its own: one worker, no races
        task.model, lambda params: SGD(params, 0.1), task, mesh, window="one-sided"),
}


def whole(comm, name: str, seed: int, mode: str):
    if comm.size < 2 and name in ("easgd-round-robin", "ps"):
        pytest.skip(f"{name} needs two ranks")
    task = gpt(seed, 2, comm.rank)
    recompute(chosen(task.model, mode))
    group = comm.split(comm.rank, name="alone") if name == "hogwild" else comm
    mesh = Mesh(group)
    strategy = WHOLE[name](mesh, task)
    try:
        return bits(strategy, [make_batch("gpt", 6, seed + step) for step in range(2)])
    finally:
        strategy.shutdown()
        strategy.close()
        mesh.free()
        if group is not comm:
            group.free()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", WHOLE)
@settings(max_examples=2)
@given(seed=st.integers(0, 2**31))
@shared_verdict
def test_strategies_of_whole_replicas_recomputed_give_the_same_bits(comm, name, mode, seed):
    assert whole(comm, name, seed, mode) == whole(comm, name, seed, "none")
