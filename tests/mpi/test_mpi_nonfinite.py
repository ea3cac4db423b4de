"""A non-finite loss or gradient on any rank makes every rank skip that step alike, in every
data-parallel strategy: the parameters and optimizer state stay as they were, the replicas stay
identical, and the next finite step is applied. The verdict rides on values already reduced."""

from types import SimpleNamespace

import dp_helpers as dp_cases
import numpy as np
from device_helpers import host
from hypothesis import given, settings
from hypothesis import strategies as st
from mpi_helpers import shared_verdict

from scratchpar.autograd import functional as F
from scratchpar.optim import AdamW
from scratchpar.parallel import DataParallel, DataParallelNaive, LocalSGD

STRATEGIES = {
    "dp": lambda *a: DataParallel(*a, bucket_bytes=64, grad_clip=1.0),
    "dp-naive": lambda *a: DataParallelNaive(*a),
    "local-sgd": lambda *a: LocalSGD(*a, every=2, grad_clip=1.0),
}


def poisoned(task, ranks: set[int], rank: int, kind: str, steps: list[int]):
    """``task`` with its loss made non-finite on ``ranks`` while ``steps[0]`` is the step being
    taken: "loss" adds inf to the loss; "gradient" adds 0·‖0‖^½, whose value is 0 but whose
    gradient is 0·∞ = NaN (the loss stays finite)."""

    def loss(model, batch, reduction="mean"):
        value = task.loss(model, batch, reduction)
        if rank not in ranks or steps[0] != 1:
            return value
        if kind == "loss":
            return value + float("inf")
        zero = F.mul(F.sum(model.parameters()[0]), 0.0)
        return value + F.pow(zero, 0.5)

    return SimpleNamespace(loss=loss, count=task.count)


def state(strategy) -> bytes:
    opt = strategy.optimizer.state_dict()
    return b"".join([host(p.data).tobytes() for p in strategy.model.parameters()] +
                    [np.asarray(host(opt[k])).tobytes() for k in sorted(opt)])


@settings(max_examples=8)
@given(name=st.sampled_from(sorted(STRATEGIES)), kind=st.sampled_from(("loss", "gradient")),
       ranks=st.sets(st.integers(0, 3), min_size=1), model=st.sampled_from(("mlp", "gpt")),
       seed=st.integers(0, 2**31))
@shared_verdict
def test_every_rank_skips_a_step_that_is_not_finite_on_any_rank(comm, mesh, name, kind, ranks,
                                                                 model, seed):
    ranks = {r % comm.size for r in ranks}
    task, steps = dp_cases.make_task(model, seed), [0]
    objective = poisoned(task, ranks, comm.rank, kind, steps)
    strategy = STRATEGIES[name](task.model, lambda params: AdamW(params, 0.01), objective, mesh)
    seen = []
    with np.errstate(all="ignore"):
        for step in range(3):
            steps[0] = step
            before = state(strategy)
            seen.append(strategy.step(dp_cases.make_batch(model, 2 * comm.size, seed + step)))
            if step == 1:
                assert state(strategy) == before  # nothing moved, optimizer state included
    assert [m["skipped"] for m in seen] == [False, True, False]
    verdicts = comm.allgather_obj([(m["skipped"], np.isfinite(m["loss"])) for m in seen])
    assert all(v == verdicts[0] for v in verdicts)  # every rank judged alike
    if name != "local-sgd":
        assert len(set(dp_cases.replica_digests(comm, task.model))) == 1
