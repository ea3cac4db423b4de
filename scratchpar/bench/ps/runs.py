"""The parameter-server benchmark's runs: a server from its spec, steps with one slowed."""

from __future__ import annotations

import numpy as np

from ... import optim
from ...backend import xp_default
from ...comm.collectives import all_reduce_
from ...comm.mpi import Communicator
from ...parallel import (
    AsyncParameterServer,
    SSPParameterServer,
    SyncParameterServer,
    SyncThenAsync,
)
from ...parallel.ps import ArrivalOrderParameterServer
from ...trace.tracer import Tracer
from ..standin import pause
from ..timing import sync

SLOWED = 0  # the worker index slowed 2×: the first worker, rank S
KEPT = ("loss", "wait_s", "staleness_mean", "staleness_max", "version")  # of the step metrics


def build(spec: dict, model, loss_fn, count_fn, comm):
    """The parameter server ``spec`` names: ``{"mode": "sync" | "ssp" | "async" | "warmup",
    "servers": S, "lr", "optimizer": "sgd" | "adam"}``, with ``"staleness"`` τ (ssp) or
    ``"warmup"`` steps (warmup); workers push and pull every step."""
    cls = optim.Adam if spec.get("optimizer") == "adam" else optim.SGD

    def make_optimizer(params):
        return cls(params, spec["lr"])

    args = (model, make_optimizer, loss_fn, count_fn, comm)
    mode, servers = spec["mode"], spec["servers"]
    if mode == "sync":
        return SyncParameterServer(*args, servers=servers)
    if mode == "ssp":
        return SSPParameterServer(*args, servers=servers, staleness=spec["staleness"])
    if mode == "async":
        return AsyncParameterServer(*args, servers=servers)
    if mode == "warmup":
        return SyncThenAsync(*args, servers=servers, warmup=spec["warmup"])
    raise ValueError(f"no parameter server mode {mode!r}")


def free_run(comm, make, batch_of, steps: int, slowed_s: float, on_servers=None,
             trace: bool = False) -> list[dict] | None:
    """``steps`` steps of the strategy ``make()`` on every rank, back to back from a start
    aligned at a barrier (no barrier between steps: the consistency rule alone paces the ranks),
    then its shutdown and close. The slowed worker sleeps ``slowed_s`` after each step (a traced
    region "slowed"). ``on_servers(k, strategy)`` runs on every server after step k (k = steps:
    after the shutdown). Rank 0 returns every rank's record: its role, the end of each step (s
    from the aligned start), its step metrics (``KEPT``, a list each), the report (server 0)
    and, with ``trace``, its traced regions; the other ranks return None."""
    comm.tracer = tracer = Tracer(comm.rank)  # before the strategy: its dup shares the tracer
    strategy = make()
    worker = comm.rank - strategy.servers
    slowed = worker == SLOWED and slowed_s > 0
    tracer.align(lambda: sync(comm))
    ends, metrics = [], {}
    for k in range(steps):
        step = strategy.step(batch_of(k))
        for key in KEPT:
            if key in step:
                metrics.setdefault(key, []).append(round(step[key], 6))
        if slowed:
            with tracer.region("slowed", "compute"):
                pause(slowed_s)
        ends.append(round(tracer.now() * 1e-9, 6))
        if on_servers is not None and strategy.is_server:
            on_servers(k, strategy)
    report = strategy.shutdown() if isinstance(strategy, ArrivalOrderParameterServer) else None
    done = tracer.now() * 1e-9
    if on_servers is not None and strategy.is_server:
        on_servers(steps, strategy)
    mine = {"rank": comm.rank, "worker": worker if worker >= 0 else None, "slowed": slowed,
            "ends_s": ends, "done_s": done, "metrics": metrics, "report": report,
            "trace": tracer.export() if trace else None}
    ranks = comm.allgather_obj(mine, "ps bench run")
    strategy.close()
    comm.tracer = None
    return ranks if comm.rank == 0 else None


class Counting(Communicator):
    """A communicator on the world that counts the bytes of the messages it posts."""

    def __init__(self):
        super().__init__(name="counting")
        self.sent = self.received = 0

    def isend(self, buf, dest: int, tag: int = 0):
        self.sent += buf.nbytes
        return super().isend(buf, dest, tag)

    def irecv(self, buf, source: int, tag: int = 0):
        self.received += buf.nbytes
        return super().irecv(buf, source, tag)


def ring_bytes(k: int, dtype=np.float32) -> tuple[int, int]:
    """(sent, received) bytes of this rank in one hand-written ring all-reduce of ``k``
    elements: counted message by message (collective over the world)."""
    counting = Counting()
    all_reduce_(counting, xp_default().zeros(k, dtype), algorithm="ring")  # (K,)
    counted = counting.sent, counting.received
    counting.free()
    return counted
