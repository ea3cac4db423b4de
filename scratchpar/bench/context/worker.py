"""The context benchmark's MPI jobs: one GPT block over a cp group of every rank (what its graph
holds, the bytes it sends), and a GPT's step at cp = 2 against one device, with the time the
ring's ranks wait on its messages."""

from __future__ import annotations

import contextlib

import numpy as np

from ... import backend
from ...autograd import Tensor
from ...autograd.held import graph_bytes
from ...comm.mesh import Mesh
from ...nn import GPT, Block
from ...optim import SGD
from ...parallel import Hybrid
from ...parallel.context import SCHEMES, Context
from ...trace.tracer import Tracer
from ...train.task import Task
from ..timing import alone, stepping, turns

VOCAB = 64


@contextlib.contextmanager
def watched(comm, tracer: Tracer):
    """Record on ``tracer`` what ``comm`` (this instance) does meanwhile: each message posted
    ("send", its payload: every collective's steps post through ``isend`` too, so these are the
    bytes on the wire), each blocking wait ("wait") but a ``sendrecv``'s, and each ``sendrecv``
    ("sendrecv", the ring's hand-on of dK, dV)."""
    isend, wait_all, sendrecv = comm.isend, comm.wait_all, comm.sendrecv

    def posted(buf, *args, **kwargs):
        """``isend``, its payload noted."""
        now = tracer.now()
        tracer.record("send", "comm", now, now, buf.nbytes)
        return isend(buf, *args, **kwargs)

    def waited(requests):
        """``wait_all``, timed."""
        with tracer.region("wait", "wait"):
            return wait_all(requests)

    def handon(*args):
        """``sendrecv``, timed whole: its own wait is the hand-on's."""
        comm.wait_all = wait_all
        try:
            with tracer.region("sendrecv", "wait"):
                return sendrecv(*args)
        finally:
            comm.wait_all = waited

    comm.isend, comm.wait_all, comm.sendrecv = posted, waited, handon
    try:
        yield tracer
    finally:
        for name in ("isend", "wait_all", "sendrecv"):
            delattr(comm, name)  # the class's methods again


def named(events, name: str) -> list:
    """The events called ``name``."""
    return [e for e in events if e.name == name]


def seconds(events) -> float:
    """The seconds the ``events`` took together."""
    return sum(e.end - e.start for e in events) / 1e9


def sent(tracer: Tracer) -> int:
    """The payload bytes a :func:`watched` trace saw posted."""
    return sum(e.bytes for e in named(tracer.events, "send"))


def blocks(comm, cfg: dict) -> list[dict]:
    """Per scheme over the ranks as one cp group (at cp = 1 one device), an ``nn.Block`` on this
    rank's positions of one X: per rank, its graph's bytes (``graph_bytes``), what it sends."""
    b, mine = cfg["block"], {}
    whole = np.random.default_rng(1).standard_normal((b["batch"], b["seq"], b["d_model"]))
    for scheme in SCHEMES if comm.size > 1 else ("one device",):
        for groups in (b["heads"], b["kv_heads"]):  # a key/value head a query head, or shared
            context = Context(comm.dup(name=f"context {scheme}"), cfg["layout"])
            block = Block(b["d_model"], b["heads"], np.random.default_rng(0), dropout=0.0,
                          kv_heads=groups)
            if comm.size > 1:
                block.attn.core = SCHEMES[scheme](context)
            x = Tensor(backend.to_device(whole[:, context.mine(b["seq"])].astype(np.float32)),
                       requires_grad=True)  # (B, T/cp, C)
            with watched(context.comm, Tracer(comm.rank)) as forward:
                y = block(x)  # (B, T/cp, C)
            held = graph_bytes(y, block.parameters())  # the input included, parameters not
            with watched(context.comm, Tracer(comm.rank)) as backward:
                y.backward(y.xp.ones_like(y.data))
            context.comm.free()
            name = scheme if groups == b["heads"] else f"{scheme}, grouped"
            mine[name] = {"activation_bytes": held, "forward": sent(forward),
                          "backward": sent(backward)}
    return comm.allgather_obj(mine, "context holdings")


def steps(comm, cfg: dict) -> dict:
    """On 2 ranks, in turns on one batch: a GPT's step (SGD) by ``Hybrid`` on rank 0 alone (the
    other asleep) and over ``Mesh(comm, cp=2)`` by each scheme; the slowest rank's times. Then
    the ring's overlap (:func:`ring_waits`), traced over ``cfg["repeats"]`` more steps, and a
    blocking exchange of the same K, V block timed alone."""
    g = cfg["gpt"]
    batch = backend.to_device(np.random.default_rng(2).integers(0, VOCAB,
                                                                (g["batch"], g["seq"] + 1)))

    def hybrid(mesh, scheme="ring"):
        """The GPT (seed 0) under ``Hybrid`` over ``mesh`` by ``scheme``."""
        model = GPT(VOCAB, g["seq"], g["d_model"], g["heads"], g["layers"],
                    np.random.default_rng(0))
        return Hybrid(model, lambda p: SGD(p, lr=0.01), Task(None, model, "tok"), mesh,
                      attention=scheme, layout=cfg["layout"])

    meshes = [Mesh(comm.split(comm.rank, name="alone")), Mesh(comm, cp=2)]
    pipes = {"one device": hybrid(meshes[0]), **{s: hybrid(meshes[1], s) for s in SCHEMES}}
    timed = turns(comm, {name: alone(stepping(p, batch), comm) if name == "one device"
                         else stepping(p, batch) for name, p in pipes.items()}, cfg)
    ring = pipes["ring"].context.comm
    with watched(ring, Tracer(comm.rank)) as trace:
        for _ in range(cfg["repeats"]):
            trace.align(comm.barrier)  # each step's clock starts at a barrier
            with trace.region("step", "compute"):
                pipes["ring"].step(batch)
    kv = backend.to_device(np.zeros((2, g["batch"], g["heads"], g["seq"] // 2,
                                     g["d_model"] // g["heads"]), np.float32))
    got, exchanged = kv.copy(), []  # (2, B, H, T/cp, d): the block the ring passes on
    for _ in range(cfg["repeats"]):
        comm.barrier()
        start = trace.now()
        ring.sendrecv(kv, 1 - comm.rank, got, 1 - comm.rank)
        exchanged.append((trace.now() - start) / 1e9)
    traces = comm.allgather_obj(trace.events, "ring traces")
    for pipe in pipes.values():
        pipe.close()
    for mesh in meshes:
        mesh.free()
    meshes[0].world.free()  # the one-rank communicator split above
    return {"timed": timed, "overlap": [ring_waits(traces, r, cfg["repeats"]) for r in (0, 1)],
            "exchange_s": float(np.median(comm.allgather_obj(exchanged, "exchange")))}


def ring_waits(traces: list, r: int, steps: int) -> dict:
    """Rank r's seconds per step of the cp = 2 ring's trace: the step; the waits on the K, V
    blocks posted a block earlier, and of them the skew, the time before the other rank reached
    its own wait on the same exchange (a rank in compute drives no message of its own, so until
    then nothing need move); the blocking hand-ons of dK, dV."""
    mine, theirs = named(traces[r], "wait"), named(traces[1 - r], "wait")
    handons = named(traces[r], "sendrecv")
    skew = sum(max(0, min(w.end, other.start) - w.start)
               for w, other in zip(mine, theirs, strict=True))
    return {"step_s": seconds(named(traces[r], "step")) / steps,
            "kv_blocks": len(mine) // steps, "kv_wait_s": seconds(mine) / steps,
            "skew_s": skew / 1e9 / steps, "handons": len(handons) // steps,
            "handon_s": seconds(handons) / steps}
