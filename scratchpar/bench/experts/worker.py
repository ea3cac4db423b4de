"""The experts benchmark's MPI jobs: one sparse layer whose experts are split over the job's
ranks (every byte its two all-to-alls send, and the all-to-all-v by hand against MPI's own),
what a rank holds of a sparse GPT at each ep, a step at ep = 2 against dp, and one layer at
ep = the world against dp with stand-in experts that sleep a real one's time."""

from __future__ import annotations

import copy

import numpy as np

from ... import backend
from ...autograd import Tensor
from ...comm import collectives
from ...comm.mesh import Mesh
from ...nn import GPT, Experts, MixtureOfExperts
from ...nn.module import Module, ModuleList, Parameter
from ...nn.routing import top_k
from ...optim import Adam
from ...parallel import Hybrid
from ...parallel.experts import ExpertGroup, expert_parallel
from ...parallel.pipeline import schedules
from ...timing import clocked, medians
from ...trace.tracer import Tracer
from ...train.task import Task
from ..context.worker import sent, watched
from ..standin import Sleep
from ..timing import fresh, stepping, turns

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


class SleepingExpert(Module):
    """(rows, C) → (rows, C): one scalar weight, and a real expert's calibrated time for its
    rows each way, a fixed part and a part per row (:class:`~..standin.Sleep`)."""

    def __init__(self, forward: tuple[float, float], backward: tuple[float, float]):
        self.weight = Parameter(np.ones(1, np.float32))
        self.forward_s, self.backward_s = forward, backward

    def forward(self, x):
        n = x.shape[0]
        return Sleep.apply(x, self.weight, forward_s=self.forward_s[0] + self.forward_s[1] * n,
                           backward_s=self.backward_s[0] + self.backward_s[1] * n)


def calibrate(s: dict, repeats: int) -> tuple[tuple, tuple]:
    """A real expert's (C → 4C → C) forward and backward seconds as a + b·rows, fitted on the
    rows one rank's tokens and twice them route to it when balanced (k·T/E·(1, 2))."""
    expert = MixtureOfExperts(s["d_model"], Experts(s["experts"], s["k"]),
                              np.random.default_rng(0)).experts[0]
    sizes = [s["k"] * s["batch"] * s["seq"] // s["experts"] * m for m in (1, 2)]
    times = []
    for rows in sizes:
        x = Tensor(backend.to_device(np.ones((rows, s["d_model"]), np.float32)),
                   requires_grad=True)
        forward = medians(clocked(lambda x=x: expert(x)), repeats)[0]
        y = expert(x)
        backward = medians(clocked(lambda y=y: y.backward(y.xp.ones_like(y.data))), repeats)[0]
        times.append((forward, backward))
    fits = []
    for phase in range(2):
        slope = (times[1][phase] - times[0][phase]) / (sizes[1] - sizes[0])
        fits.append((max(times[0][phase] - slope * sizes[0], 0.0), max(slope, 0.0)))
    return tuple(fits[0]), tuple(fits[1])


def sleeping(comm, cfg: dict) -> dict:
    """One sparse layer on every rank's tokens, its experts stand-ins sleeping a real expert's
    calibrated time (rank 0 measures it): at dp (every rank every expert, its own tokens) and
    at ep = the world (E/ep experts each, every rank's tokens for them), in turns; beyond the
    machine's cores a sleeping rank holds none, so the ranks' experts run as if each had one.
    Then the ep layer traced: the largest share of a rank's time blocked on the all-to-alls."""
    s = cfg["layer"]
    fits = comm.allgather_obj(calibrate(s, cfg["repeats"]) if comm.rank == 0 else None,
                              "expert time")[0]
    mesh = Mesh(comm, ep=comm.size)
    x = Tensor(backend.to_device(np.random.default_rng([1, comm.rank]).standard_normal(
        (s["batch"], s["seq"], s["d_model"])).astype(np.float32)), requires_grad=True)
    groups, contenders = [], {}
    for name, ep in (("dp", None), (f"ep {comm.size}", mesh.ep_comm)):
        moe = MixtureOfExperts(s["d_model"], Experts(s["experts"], s["k"], 0.0),
                               np.random.default_rng(0))
        moe.experts = ModuleList([SleepingExpert(*fits) for _ in range(s["experts"])])
        group = ExpertGroup(mesh.replica_comm.dup(name="tally"),
                            None if ep is None else ep.dup(name="ep"))
        expert_parallel(moe, group)
        groups.append(group)
        contenders[name] = fresh(moe, x, lambda moe=moe: moe(x).backward(
            x.xp.ones_like(x.data)))
    timed = turns(comm, contenders, cfg)
    with watched(groups[1].ep, Tracer(comm.rank)) as trace:
        start = trace.now()
        for _ in range(cfg["repeats"]):
            contenders[f"ep {comm.size}"]()
        total = trace.now() - start
    waited = sum(e.end - e.start for e in trace.events if e.name == "wait")
    for group in groups:
        group.free()
    mesh.free()
    return {"timed": timed, "fits": fits,
            "waited": max(comm.allgather_obj(waited / total, "ep waits"))}
