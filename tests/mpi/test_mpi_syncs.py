"""How often one step of each data-parallel strategy makes the host wait for the device, on the
double: once, for the guard's verdict on the reduced loss and gradient norm, on top of whatever
the model's own forward and backward wait for. Staged messages copy through pinned memory only."""

import dp_helpers as dp_cases
import pytest
from mpi_helpers import shared_verdict

from scratchpar.data.shard import shard
from scratchpar.double import watch
from scratchpar.optim import AdamW
from scratchpar.parallel import DataParallel, DataParallelNaive, LocalSGD

STRATEGY_SYNCS = 1  # per step: the non-finite guard reads the loss and the norm in one copy
STRATEGIES = {
    "dp": lambda *a: DataParallel(*a, bucket_bytes=256, grad_clip=1.0),
    "dp-naive": lambda *a: DataParallelNaive(*a, grad_clip=1.0),
    "local-sgd": lambda *a: LocalSGD(*a, every=2, grad_clip=1.0),  # step 2 averages
}


def model_syncs(task, batch, comm) -> list[str]:
    """The waits of the model's own forward and backward on this rank's shard."""
    mine = shard(batch, comm.rank, comm.size)
    with watch() as seen:
        task.loss(task.model, mine, "sum").backward()
        task.count(mine)
    task.model.zero_grad()
    return seen.syncs_from("scratchpar")


@pytest.mark.parametrize("kind", ["mlp", "gpt"])
@pytest.mark.parametrize("name", sorted(STRATEGIES))
@shared_verdict
def test_a_step_waits_for_the_device_once_beyond_the_model(comm, mesh, device, name, kind):
    if device != "double":
        pytest.skip("only the double counts what the host waited for")
    task = dp_cases.make_task(kind, 3)
    strategy = STRATEGIES[name](task.model, lambda params: AdamW(params, 0.01), task, mesh)
    batch = dp_cases.make_batch(kind, 2 * comm.size + 1, 3)
    strategy.step(batch)  # the first step builds buffers and optimizer state
    model = model_syncs(task, batch, comm)
    seen = []
    for _ in range(2):  # every step first, then the checks: a failing rank stays in step
        with watch() as step:
            strategy.step(batch)
        seen.append(step)
    assert model == [], f"the model's forward, backward and count waited: {model}"
    for number, step in enumerate(seen, start=2):
        syncs = step.syncs_from("scratchpar")
        assert len(syncs) == STRATEGY_SYNCS, f"step {number} of {name} waited {len(syncs)} " \
            f"times: {syncs}"
        staged = [c for c in step.pageable_copies if " at scratchpar/comm/" in c]
        assert staged == [], f"messages staged through pageable memory: {staged}"


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b", "interleaved"])
@shared_verdict
def test_a_pipeline_step_waits_for_the_device_once(comm, device, schedule):
    """Micro-batches, messages, the shared and replica sums and the world's [loss, ‖g‖²] all stay
    on the device; the guard's one read is the step's one wait."""
    if device != "double":
        pytest.skip("only the double counts what the host waited for")
    from pipeline_helpers import make_batch, make_pipeline, make_task

    v = 2 if schedule == "interleaved" else 1
    task = make_task("tied", 3, depth=max(4, 2 * comm.size))
    pipe = make_pipeline(comm, task, schedule, comm.size, comm.size, v, adam=True, clip=1.0)
    batch = make_batch("tied", 2 * comm.size + 1, 3)
    pipe.step(batch)  # the first step agrees on shapes and builds optimizer state
    seen = []
    for _ in range(2):
        with watch() as step:
            pipe.step(batch)
        seen.append(step)
    for step in seen:
        syncs = step.syncs_from("scratchpar")
        assert len(syncs) == STRATEGY_SYNCS, f"a {schedule} step waited {len(syncs)} times: {syncs}"
        staged = [c for c in step.pageable_copies if " at scratchpar/comm/" in c]
        assert staged == [], f"messages staged through pageable memory: {staged}"


@pytest.mark.parametrize("sequence_parallel", [False, True])
@shared_verdict
def test_a_hybrid_step_waits_for_the_device_once(comm, device, sequence_parallel):
    """The tensor-parallel layers, the vocabulary-parallel loss and the partial sums over tp add
    no wait: the guard's one read is still the step's one wait, on every mesh of the world."""
    if device != "double":
        pytest.skip("only the double counts what the host waited for")
    from pipeline_helpers import make_batch, make_hybrid, make_task

    from scratchpar.comm.mesh import factorizations

    waits = {}
    for dp, pp, tp in factorizations(comm.size):
        task = make_task("tied", 3)
        pipe = make_hybrid(comm, task, "1f1b", dp, pp, tp, 2, adam=True, clip=1.0,
                           sequence_parallel=sequence_parallel)
        batch = make_batch("tied", 2 * dp + 1, 3)
        pipe.step(batch)  # the first step agrees on shapes and builds optimizer state
        with watch() as step:
            pipe.step(batch)
        waits[f"{dp}×{pp}×{tp}"] = step.syncs_from("scratchpar")
    for mesh, syncs in waits.items():  # every mesh run on every rank first: then assert
        assert len(syncs) == STRATEGY_SYNCS, f"{mesh}: {len(syncs)} waits: {syncs}"
