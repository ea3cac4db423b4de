"""A pipeline's held-out score in its training layout: the schedule's forward actions alone,
in eval mode, each stage on its own layers (and each tp rank on its shard)."""

from __future__ import annotations

from ...autograd import no_grad
from ...backend import to_host
from ...comm import collectives
from ...data.shard import shard

FORWARD = frozenset({"F", "SEND_ACT", "RECV_ACT"})


def score_forward(pipe, batch, task) -> tuple[float, float]:
    """The global ``batch``'s summed loss and the samples labelled right, the same on every
    rank: each replica its rows in the schedule's micro-batches, the forward half of each
    rank's actions (a schedule's sends and receives of activations match by themselves), the
    last stage's scores summed over the world."""
    replica = shard(batch, pipe.mesh.dp_comm.rank, pipe.mesh.dp)
    micro = pipe.micro_batches(replica)
    runtime, loss_fn, right = pipe.runtime, pipe.runtime.loss_fn, []

    def scored(out, targets, reduction: str = "mean"):
        right.append(task.right(out, targets))
        return loss_fn(out, targets, reduction)

    runtime.loss_fn = scored
    modules = pipe.stage.chunks  # this rank's layers (of its tp shard, under Hybrid)
    for module in modules:
        module.eval()
    try:
        with no_grad():
            losses = runtime.run([a for a in pipe.actions if a.kind in FORWARD], micro, None)
    finally:
        runtime.loss_fn = loss_fn
        for module in modules:
            module.train()
    totals = pipe.xp.zeros(2, "float64")  # [Σ loss, Σ right] of this rank's micro-batches
    if pipe.mesh.tp_comm.rank == 0:  # the tp ranks of the last stage score alike
        for loss, hits in zip(losses, right):
            totals += pipe.xp.asarray([loss.data, hits], dtype="float64")
    collectives.all_reduce_(pipe.comm, totals)
    return tuple(float(t) for t in to_host(totals))
