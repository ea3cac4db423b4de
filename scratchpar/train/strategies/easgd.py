"""Elastic averaging on the command line: its flags, rules, and the mode's strategy."""

from __future__ import annotations

from dataclasses import dataclass

from ...parallel import AsyncEASGD, RoundRobinEASGD, SyncEASGD
from ..option import count, opt
from .family import Family

EASGD = ("easgd",)
MASTERED = ("async", "round-robin")  # the modes whose rank 0 is a master, not a worker
BETA = 0.9  # β = pα, the elastic force summed over the workers (Zhang et al. 2015, §5)


@dataclass(frozen=True)
class ElasticFlags:
    easgd_mode: str = opt("sync", "easgd: synchronous (the elastic differences all-reduced "
                                  "every --tau steps), async (the centre on master rank 0, each "
                                  "worker exchanging every --tau of its own steps) or "
                                  "round-robin (a CPU master serves one worker per step)",
                          choices=("sync", "async", "round-robin"), owners=EASGD)
    rho: float | None = opt(None, "easgd: ρ, the elastic force, α = ηρ (default: the paper's "
                                  "β = pα = 0.9 at the peak rate η, ρ = 0.9/(p·η) for p "
                                  "workers)", kind=float, owners=EASGD)
    tau: int = opt(4, "easgd sync, async: steps between exchanges with the centre (τ)",
                   owners=EASGD)


class ElasticFamily(Family):
    """``--strategy easgd``: the mode's strategy, with ρ = β/(p·η) unless ``--rho`` is given."""

    names = {"easgd": "elastic averaging (EASGD: --easgd-mode sync, async or round-robin)"}
    flags = ElasticFlags

    def problems(self, c, world_size: int) -> list[str]:
        t, problems = c.train, []
        if t.easgd_mode in MASTERED and world_size < 2:
            problems.append(f"--easgd-mode {t.easgd_mode} needs a master and a worker: 2 ranks "
                            f"or more, not {world_size}")
        if t.rho is not None and not t.rho >= 0:
            problems.append(f"--rho must be non-negative; got {t.rho}")
        if t.tau < 1:
            problems.append(f"--tau must be at least 1; got {t.tau}")
        elif t.tau != ElasticFlags.tau and t.easgd_mode == "round-robin":
            problems.append("--tau goes with --easgd-mode sync or async: round-robin exchanges "
                            "with the master at every step")
        return problems

    def workers(self, c, world_size: int) -> int:
        """All ranks but the master share each batch; round-robin hands it to one worker."""
        mode = c.train.easgd_mode
        return 1 if mode == "round-robin" else world_size - (mode in MASTERED)

    def computing(self, c, world_size: int) -> int:
        return world_size - (c.train.easgd_mode in MASTERED)

    def describe(self, cfg, shape, world_size: int):
        t = cfg.train
        if t.easgd_mode == "sync":
            return SyncEASGD.describe(shape, world_size, tau=t.tau, bucket_bytes=t.bucket_bytes)
        if t.easgd_mode == "async":
            return AsyncEASGD.describe(shape, world_size, tau=t.tau)
        return RoundRobinEASGD.describe(shape, world_size)

    def build(self, cfg, task, make_optimizer, mesh):
        t, o, comm = cfg.train, cfg.optim, mesh.world
        p = comm.size - (t.easgd_mode in MASTERED)  # the workers: all ranks but a master
        rho = t.rho if t.rho is not None else BETA / (p * o.lr)  # α = ηρ = β/p at the peak rate
        args = (task.model, make_optimizer, task, mesh)
        if t.easgd_mode == "sync":
            strategy = SyncEASGD(*args, rho=rho, tau=t.tau, grad_clip=o.grad_clip,
                                 bucket_bytes=t.bucket_bytes)
            roles = f"all {comm.size} ranks are workers, each holding the centre"
        elif t.easgd_mode == "async":
            strategy = AsyncEASGD(*args, rho=rho, tau=t.tau, grad_clip=o.grad_clip)
            roles = f"rank 0 is the master, holding the centre on the host; {count(p, 'worker')}"
        else:
            strategy = RoundRobinEASGD(*args, rho=rho, grad_clip=o.grad_clip)
            roles = f"rank 0 is the CPU master; worker j = t mod {p} takes step t"
        if comm.rank == 0:
            local = o.optimizer if o.optimizer != "sgd" else \
                f"SGD with Nesterov momentum {o.momentum:g} (EAMSGD)" if o.momentum else "SGD"
            every = ("" if t.easgd_mode == "round-robin" else
                     f", exchanging every {count(t.tau, 'step')}")
            print(f"easgd {t.easgd_mode}: ρ = {rho:.4g}, α = ηρ = {o.lr * rho:.4g} at the peak "
                  f"rate{every}; local optimizer {local}; {roles}", flush=True)
        return strategy
