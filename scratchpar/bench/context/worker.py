"""The context benchmark's MPI jobs: one GPT block whose attention runs over the job's ranks as
one cp group (what its graph holds, every byte it sends), and a small GPT's step at cp = 2
against one device, with the time the ring's ranks wait on its messages."""

from __future__ import annotations

import contextlib
import copy

import numpy as np

from ... import backend
from ...autograd import Tensor
from ...autograd.held import graph_bytes
from ...comm.mesh import Mesh
from ...nn import GPT, Block
from ...optim import SGD
from ...parallel import Hybrid
from ...parallel.context import SCHEMES, Context
from ...parallel.pipeline import schedules
from ...trace.tracer import Tracer
from ...train.task import Task
from ..timing import alone, stepping, turns

VOCAB = 64


@contextlib.contextmanager
def watched(comm, tracer: Tracer):
    """Record on ``tracer`` what ``comm`` (this instance: a cp group's own) does meanwhile:
    each message posted ("send", its payload: every collective's steps post through
    ``isend`` too, so these are the bytes on the wire), each blocking wait ("wait") but a
    ``sendrecv``'s, each ``sendrecv`` ("sendrecv", the ring's hand-on of dK, dV), and each
    pickled metadata exchange ("metadata", which no formula counts)."""
    isend, wait_all, sendrecv, gather = comm.isend, comm.wait_all, comm.sendrecv, comm.allgather_obj

    def posted(buf, dest, tag=0):
        now = tracer.now()
        tracer.record("send", "comm", now, now, buf.nbytes)
        return isend(buf, dest, tag)

    def waited(requests):
        with tracer.region("wait", "wait"):
            return wait_all(requests)

    def handon(*args):
        comm.wait_all = wait_all  # its own wait is the hand-on's
        try:
            with tracer.region("sendrecv", "wait"):
                return sendrecv(*args)
        finally:
            comm.wait_all = waited

    def counted(obj, what="metadata exchange"):
        now = tracer.now()
        tracer.record("metadata", "comm", now, now)
        return gather(obj, what)

    comm.isend, comm.allgather_obj = posted, counted
    comm.wait_all, comm.sendrecv = waited, handon
    try:
        yield tracer
    finally:
        for name in ("isend", "allgather_obj", "wait_all", "sendrecv"):
            delattr(comm, name)  # the class's methods again


def sent(tracer: Tracer) -> dict:
    """The payload bytes and messages posted, and the metadata exchanges, of a trace."""
    sends = [e.bytes for e in tracer.events if e.name == "send"]
    return {"bytes": int(sum(sends)), "messages": len(sends),
            "metadata": sum(e.name == "metadata" for e in tracer.events)}


def blocks(comm, cfg: dict) -> dict:
    """The ranks are one cp group. Per scheme, an ``nn.Block`` (float32, dropout 0) whose
    attention core is the scheme's over the group, on this rank's ``layout`` positions of one
    input X (B, T, C): the bytes its forward graph holds (``graph_bytes``, the input included,
    parameters not), and what it sends forward and backward; at cp = 1 the block as it is."""
    b, layout = cfg["block"], cfg["layout"]
    batch, t, c, heads = b["batch"], b["seq"], b["d_model"], b["heads"]
    x_whole = np.random.default_rng(1).standard_normal((batch, t, c)).astype(np.float32)
    mine = {}
    for scheme in SCHEMES if comm.size > 1 else ("one device",):
        context = Context(comm.dup(name=f"context {scheme}"), layout)
        block = Block(c, heads, np.random.default_rng(0), dropout=0.0)
        if comm.size > 1:
            block.attn.core = SCHEMES[scheme](context)
        x = Tensor(backend.to_device(np.ascontiguousarray(x_whole[:, context.mine(t)])),
                   requires_grad=True)  # (B, T/cp, C)
        with watched(context.comm, Tracer(comm.rank)) as forward:
            y = block(x)  # (B, T/cp, C)
        held = graph_bytes(y, block.parameters())
        with watched(context.comm, Tracer(comm.rank)) as backward:
            y.backward(y.xp.ones_like(y.data))
        mine[scheme] = {"activation_bytes": held, "forward": sent(forward),
                        "backward": sent(backward)}
        context.comm.free()
    return {"per_rank": comm.allgather_obj(mine, "context holdings")}


def steps(comm, cfg: dict) -> dict:
    """On 2 ranks: a GPT's training step (SGD, float32) by ``Hybrid`` over ``Mesh(comm,
    cp=2)``, per scheme, and by ``Hybrid`` on one rank (rank 0, the other asleep), in turns on
    the same global batch. Then the ring's overlap, traced over ``cfg["repeats"]`` more steps
    of its cp group: the time posted messages keep a rank waiting, against a blocking exchange
    of the same block (K and V of this rank's positions) timed alone."""
    g = cfg["gpt"]
    model = GPT(VOCAB, g["seq"], g["d_model"], g["heads"], g["layers"], np.random.default_rng(0))
    batch = backend.to_device(np.random.default_rng(2).integers(0, VOCAB,
                                                                (g["batch"], g["seq"] + 1)))

    def hybrid(mesh, scheme="ring"):
        whole = copy.deepcopy(model)
        task = Task(None, whole, "tok")
        return Hybrid(whole, lambda p: SGD(p, lr=0.01), task, mesh, attention=scheme,
                      schedule=schedules.build("1f1b", 1, 1), layout=cfg["layout"])

    meshes = [Mesh(comm.split(comm.rank, name="alone")), Mesh(comm, cp=2)]
    pipes = {"one device": hybrid(meshes[0]), **{s: hybrid(meshes[1], s) for s in SCHEMES}}
    timed = turns(comm, {name: alone(stepping(p, batch), comm) if name == "one device"
                         else stepping(p, batch) for name, p in pipes.items()}, cfg)
    ring = pipes["ring"].context.comm
    with watched(ring, Tracer(comm.rank)) as trace:
        for _ in range(cfg["repeats"]):
            trace.align(comm.barrier)
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
    found = [ring_waits(traces, r, cfg["repeats"]) for r in range(2)]
    exchange = float(np.median(comm.allgather_obj(exchanged, "exchange")))  # both ranks'
    for pipe in pipes.values():
        pipe.close()
    for mesh in meshes:
        mesh.free()
    meshes[0].world.free()  # the one-rank communicator split above
    return {"timed": timed, "overlap": found, "exchange_s": exchange, "kv_bytes": kv.nbytes}


def ring_waits(traces: list, r: int, steps: int) -> dict:
    """Rank r's seconds per step of the cp = 2 ring's trace (each step's clock starting at a
    barrier): the step; the waits on the K, V blocks posted a block earlier, and of them the
    time before the other rank reached its own wait on the same exchange (its j-th): a rank
    in compute drives no message of its own, so until then nothing need move; the blocking
    hand-ons of dK, dV."""
    mine, theirs = _named(traces[r], "wait"), _named(traces[1 - r], "wait")
    handons = _named(traces[r], "sendrecv")
    skew = sum(max(0, min(w.end, other.start) - w.start)
               for w, other in zip(mine, theirs, strict=True))
    return {"step_s": _seconds(_named(traces[r], "step")) / steps,
            "kv_blocks": len(mine) // steps, "kv_wait_s": _seconds(mine) / steps,
            "skew_s": skew / 1e9 / steps, "handons": len(handons) // steps,
            "handon_s": _seconds(handons) / steps}


def _named(events, name: str) -> list:
    return [e for e in events if e.name == name]


def _seconds(events) -> float:
    return sum(e.end - e.start for e in events) / 1e9
