"""The experts benchmark's MPI jobs: one sparse layer over an ep group of every rank (the bytes
it sends, and the all-to-all-v by hand against MPI's own), what a rank holds of a sparse GPT at
each ep, a step at ep = 2 against dp, and one layer at ep = the world against dp with stand-in
experts that sleep a real one's time."""

from __future__ import annotations

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
from ...parallel.description import Shape
from ...parallel.experts import experts_over
from ...timing import clocked, medians
from ...trace.tracer import Tracer
from ...train.task import Task
from ..context.worker import named, seconds, sent, watched
from ..standin import Sleep
from ..timing import fresh, stepping, turns

VOCAB = 64
FLOAT32, ADAM_MOMENTS = 4, 2


def sparse_layer(s: dict, rank: int) -> tuple[MixtureOfExperts, Tensor]:
    """The dropless sparse layer of ``s`` (seed 0), and this rank's tokens X (B, T, C)."""
    moe = MixtureOfExperts(s["d_model"], Experts(s["experts"], s["k"], 0.0),
                           np.random.default_rng(0))
    x = np.random.default_rng([1, rank]).standard_normal((s["batch"], s["seq"], s["d_model"]))
    return moe, Tensor(backend.to_device(x.astype(np.float32)), requires_grad=True)


def sparse_gpt(cfg: dict) -> GPT:
    """The sparse GPT of ``cfg["gpt"]`` (float32, seed 0)."""
    g = cfg["gpt"]
    return GPT(VOCAB, g["seq"], g["d_model"], g["heads"], g["layers"], np.random.default_rng(0),
               experts=Experts(g["experts"], g["k"], g["capacity"]))


def hybrid(cfg: dict, mesh) -> Hybrid:
    """:func:`sparse_gpt` under ``Hybrid`` (Adam) over ``mesh``."""
    model = sparse_gpt(cfg)
    return Hybrid(model, lambda p: Adam(p, lr=1e-3), Task(None, model, "tok"), mesh)


def tokens(cfg: dict, ranks: int):
    """A global batch of token ids (seed 2) for :func:`sparse_gpt`, its batch rows a rank."""
    g = cfg["gpt"]
    return backend.to_device(np.random.default_rng(2).integers(
        0, VOCAB, (g["batch"] * ranks, g["seq"] + 1)))


def held(comm, cfg: dict) -> list[dict]:
    """Per ep dividing the world and state, what rank 0 holds after a step of :func:`sparse_gpt`
    by ``Hybrid`` (Adam) over ``Mesh(comm, ep=ep)``, against ``Hybrid.describe`` (experts E/ep)."""
    g, model, rows = cfg["gpt"], sparse_gpt(cfg), []
    batch = tokens(cfg, comm.size)
    shape = Shape.of(model, FLOAT32, ADAM_MOMENTS)
    experts = sum(p.size for name, p in model.named_parameters() if ".experts." in name)
    for ep in [e for e in range(1, comm.size + 1) if comm.size % e == 0]:
        holds = Hybrid.describe(shape, comm.size, rows=g["batch"] * comm.size, ep=ep,
                                sparse=(g["layers"], experts, g["k"])).holds
        mesh = Mesh(comm, ep=ep)
        pipe = hybrid(cfg, mesh)
        pipe.step(batch)
        states = [v for v in pipe.optimizer.state_dict().values() if hasattr(v, "nbytes")]
        mine = {"parameters": sum(p.data.nbytes for p in pipe.params),
                "gradients": sum(p.grad.nbytes for p in pipe.params),
                "optimizer": sum(v.nbytes for v in states)}
        rows += [{"ep": ep, "state": part, "held B": n, "estimate B": holds[part],
                  "ratio": n / holds[part]} for part, n in mine.items()]
        pipe.close()
        mesh.free()
    return rows


def layer(comm, cfg: dict) -> list[dict]:
    """The ranks one ep group, a dropless sparse layer on each rank's tokens: per rank the bytes
    it posts each way, its tokens, and the assignments it sends each rank; then the dispatch's
    all-to-all-v of its rows, by hand (pairwise) and by MPI, median seconds."""
    s, mesh = cfg["layer"], Mesh(comm, ep=comm.size)
    moe, x = sparse_layer(s, comm.rank)
    group = experts_over(moe, mesh)
    with watched(group.ep, Tracer(comm.rank)) as forward:
        y = moe(x)
    with watched(group.ep, Tracer(comm.rank)) as backward:
        y.backward(y.xp.ones_like(y.data))
    logits = backend.to_host(x.data).reshape(-1, s["d_model"]) @ backend.to_host(
        moe.router.weight.data)  # (N, E): the router's, its softmax's order
    per_expert = np.bincount(top_k(logits, s["k"]).reshape(-1), minlength=s["experts"])
    to = per_expert.reshape(comm.size, -1).sum(1).tolist()  # assignments to each rank
    rows = backend.to_device(np.zeros((sum(to), s["d_model"]), np.float32))
    timed = {a: medians(clocked(lambda a=a: collectives.all_to_all_v(
        group.ep, rows, to, algorithm=a)), cfg["repeats"], start=comm.barrier)[0]
        for a in ("pairwise", "mpi")}
    mine = {"forward": sent(forward), "backward": sent(backward),
            "tokens": s["batch"] * s["seq"], "to": to, "seconds": timed}
    group.free()
    mesh.free()
    return comm.allgather_obj(mine, "expert layer")


def against_dp(comm, contenders: dict, ep, cfg: dict) -> dict:
    """The contenders, dp's then ep's, timed in turns (``turns``); then ep's traced over its ep
    group ``ep``: the largest share of a rank's time blocked on the all-to-alls' messages."""
    timed, run = turns(comm, contenders, cfg), list(contenders.values())[-1]
    with watched(ep, Tracer(comm.rank)) as trace:
        start = trace.now()
        for _ in range(cfg["repeats"]):
            run()
        share = seconds(named(trace.events, "wait")) / ((trace.now() - start) / 1e9)
    return {"timed": timed, "waited": max(comm.allgather_obj(share, "ep waits"))}


def steps(comm, cfg: dict) -> dict:
    """On 2 ranks, in turns on one global batch: a step of :func:`hybrid` at dp 2 (every rank
    all the experts) and at dp 2 × ep 2, as :func:`against_dp` times them."""
    batch = tokens(cfg, comm.size)
    meshes = {"dp 2": Mesh(comm), "dp 2 × ep 2": Mesh(comm, ep=2)}
    pipes = {name: hybrid(cfg, mesh) for name, mesh in meshes.items()}
    found = against_dp(comm, {name: stepping(p, batch) for name, p in pipes.items()},
                       pipes["dp 2 × ep 2"].experts.ep, cfg)
    for pipe, mesh in zip(pipes.values(), meshes.values()):
        pipe.close()
        mesh.free()
    return found


class SleepingExpert(Module):
    """(rows, C) → (rows, C): one scalar weight, and a real expert's calibrated time for its
    rows each way, a + b·rows (:class:`~..standin.Sleep`)."""

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
    expert = sparse_layer(s, 0)[0].experts[0]
    sizes = [s["k"] * s["batch"] * s["seq"] // s["experts"] * m for m in (1, 2)]
    times = []
    for rows in sizes:
        x = Tensor(backend.to_device(np.ones((rows, s["d_model"]), np.float32)),
                   requires_grad=True)
        forward = medians(clocked(lambda x=x: expert(x)), repeats)[0]
        y = expert(x)
        backward = medians(clocked(lambda y=y: y.backward(y.xp.ones_like(y.data))), repeats)[0]
        times.append((forward, backward))
    times = np.array(times)  # (2 sizes, forward and backward)
    slope = (times[1] - times[0]) / (sizes[1] - sizes[0])
    base = np.maximum(times[0] - slope * sizes[0], 0.0)
    return tuple(zip(base.tolist(), np.maximum(slope, 0.0).tolist()))


def sleeping(comm, cfg: dict) -> dict:
    """One sparse layer on every rank's tokens, its experts stand-ins sleeping a real expert's
    calibrated time (rank 0 fits it), at dp (every rank every expert, its own tokens) and at
    ep = the world, as :func:`against_dp` times them: beyond the machine's cores a sleeping
    rank holds none, so the ranks' experts run as if each had one."""
    s = cfg["layer"]
    fits = comm.allgather_obj(calibrate(s, cfg["repeats"]) if comm.rank == 0 else None,
                              "expert time")[0]
    meshes = {"dp": Mesh(comm), "ep = ranks": Mesh(comm, ep=comm.size)}
    groups, contenders = [], {}
    for name, mesh in meshes.items():
        moe, x = sparse_layer(s, comm.rank)
        moe.experts = ModuleList([SleepingExpert(*fits) for _ in range(s["experts"])])
        groups.append(experts_over(moe, mesh))
        contenders[name] = fresh(moe, x, lambda moe=moe, x=x: moe(x).backward(
            x.xp.ones_like(x.data)))
    found = against_dp(comm, contenders, groups[-1].ep, cfg)
    for group, mesh in zip(groups, meshes.values()):
        group.free()
        mesh.free()
    return {**found, "fits": fits}
