"""The experts benchmark's MPI jobs: one sparse layer whose experts are split over the job's
ranks (every byte its two all-to-alls send, and the all-to-all-v by hand against MPI's own),
what a rank holds of a sparse GPT at each ep, and a step at ep = 2 against dp."""

from __future__ import annotations

import copy

import numpy as np

from ... import backend
from ...autograd import Tensor
from ...comm import collectives
from ...comm.mesh import Mesh
from ...nn import GPT, Experts, MixtureOfExperts
from ...nn.routing import top_k
from ...optim import Adam
from ...parallel import Hybrid
from ...parallel.experts import ExpertGroup, expert_parallel
from ...parallel.pipeline import schedules
from ...timing import clocked, medians
from ...trace.tracer import Tracer
from ...train.task import Task
from ..context.worker import sent, watched
from ..timing import stepping, turns

VOCAB = 64


def layer(comm, cfg: dict) -> dict:
    """The ranks are one ep group (``Mesh(comm, ep=size)``). A sparse layer (float32,
    dropless) on each rank's own tokens: the bytes each rank posts forward and backward over
    the group, its tokens, the assignments it sends to each rank; then the dispatch's
    all-to-all-v of this rank's buffer, by hand (pairwise) and by MPI, median seconds."""
    s = cfg["layer"]
    mesh = Mesh(comm, ep=comm.size)
    moe = MixtureOfExperts(s["d_model"], Experts(s["experts"], s["k"], 0.0),
                           np.random.default_rng(0))
    group = ExpertGroup(mesh.replica_comm.dup(name="tally"), mesh.ep_comm.dup(name="ep"))
    expert_parallel(moe, group)
    x = np.random.default_rng([1, comm.rank]).standard_normal(
        (s["batch"], s["seq"], s["d_model"])).astype(np.float32)
    x = Tensor(backend.to_device(x), requires_grad=True)
    with watched(group.ep, Tracer(comm.rank)) as forward:
        y = moe(x)
    with watched(group.ep, Tracer(comm.rank)) as backward:
        y.backward(y.xp.ones_like(y.data))
    logits = backend.to_host(x.data).reshape(-1, s["d_model"]) @ backend.to_host(
        moe.router.weight.data)  # (N, E): the router's, its softmax's order
    per_expert = np.bincount(top_k(logits, s["k"]).reshape(-1), minlength=s["experts"])
    buffer = backend.to_device(np.zeros((sum(per_expert), s["d_model"]), np.float32))
    counts = np.array(per_expert).reshape(comm.size, -1).sum(1).tolist()
    timed = {a: medians(clocked(lambda a=a: collectives.all_to_all_v(
        group.ep, buffer, counts, algorithm=a)), cfg["repeats"], start=comm.barrier)[0]
        for a in ("pairwise", "mpi")}
    mine = {"forward": sent(forward), "backward": sent(backward), "tokens": s["batch"] * s["seq"],
            "to": counts, "seconds": timed}
    group.free()
    mesh.free()
    return {"per_rank": comm.allgather_obj(mine, "expert layer")}


def sparse_gpt(cfg: dict, dtype=np.float32) -> GPT:
    g = cfg["gpt"]
    return GPT(VOCAB, g["seq"], g["d_model"], g["heads"], g["layers"],
               np.random.default_rng(0), dtype=dtype,
               experts=Experts(g["experts"], g["k"], g["capacity"]))


def held(comm, cfg: dict) -> dict:
    """Per ep dividing the world: a sparse GPT trained one step by ``Hybrid`` over ``Mesh(comm,
    ep=ep)`` (Adam, float32), and the bytes this rank then holds in parameters, gradients and
    optimizer state."""
    g, out = cfg["gpt"], {}
    batch = backend.to_device(np.random.default_rng(2).integers(
        0, VOCAB, (g["batch"] * comm.size, g["seq"] + 1)))
    for ep in [e for e in range(1, comm.size + 1) if comm.size % e == 0]:
        mesh = Mesh(comm, ep=ep)
        model = sparse_gpt(cfg)
        pipe = Hybrid(model, lambda p: Adam(p, lr=1e-3), Task(None, model, "tok"), mesh,
                      schedule=schedules.build("1f1b", 1, 1))
        pipe.step(batch)
        states = [v for v in pipe.optimizer.state_dict().values() if hasattr(v, "nbytes")]
        out[ep] = {"parameters": sum(p.data.nbytes for p in pipe.params),
                   "gradients": sum(p.grad.nbytes for p in pipe.params),
                   "optimizer": sum(v.nbytes for v in states)}
        pipe.close()
        mesh.free()
    return {"per_rank": comm.allgather_obj(out, "held bytes")}


def steps(comm, cfg: dict) -> dict:
    """On 2 ranks: a sparse GPT's step by ``Hybrid`` over ``Mesh(comm)`` (dp 2, every rank all
    the experts) and over ``Mesh(comm, ep=2)``, in turns on the same global batch; then the
    ep run's steps traced: the seconds inside its layers' all-to-alls."""
    g = cfg["gpt"]
    batch = backend.to_device(np.random.default_rng(2).integers(
        0, VOCAB, (g["batch"] * comm.size, g["seq"] + 1)))
    model = sparse_gpt(cfg)

    def hybrid(mesh):
        whole = copy.deepcopy(model)
        return Hybrid(whole, lambda p: Adam(p, lr=1e-3), Task(None, whole, "tok"), mesh,
                      schedule=schedules.build("1f1b", 1, 1))

    meshes = {"dp 2": Mesh(comm), "dp 2, ep 2": Mesh(comm, ep=2)}
    pipes = {name: hybrid(mesh) for name, mesh in meshes.items()}
    timed = turns(comm, {name: stepping(p, batch) for name, p in pipes.items()}, cfg)
    ep = pipes["dp 2, ep 2"]
    with watched(ep.experts.ep, Tracer(comm.rank)) as trace:
        start = trace.now()
        for _ in range(cfg["repeats"]):
            ep.step(batch)
        total = (trace.now() - start) / 1e9
    waited = sum(e.end - e.start for e in trace.events if e.name == "wait") / 1e9
    for pipe in pipes.values():
        pipe.close()
    for mesh in meshes.values():
        mesh.free()
    return {"timed": timed, "exchange": comm.allgather_obj(
        {"step_s": total / cfg["repeats"], "waited_s": waited / cfg["repeats"]}, "ep")}
