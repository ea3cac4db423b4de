"""Hogwild and elastic averaging from a Config: the window or mode, and rank 0 says the roles."""

from __future__ import annotations

from ..parallel.easgd import AsyncEASGD, RoundRobinEASGD, SyncEASGD
from ..parallel.hogwild import Hogwild
from .validate_async import MASTERED

BETA = 0.9  # β = pα, the elastic force summed over the workers (Zhang et al. 2015, §5)


def build_hogwild(cfg, task, optimizer, comm):
    """``--strategy hogwild``: every rank a worker on θ in a shared or one-sided window."""
    t = cfg.train
    window = t.window if t.window != "auto" else \
        "shared" if comm.local_size == comm.size else "one-sided"
    strategy = Hogwild(task.model, optimizer, task.loss, task.count, comm, lock=t.lock,
                       window=window, grad_clip=cfg.optim.grad_clip)
    if comm.rank == 0:
        where = "a shared-memory window every rank maps" if window == "shared" else \
            "rank 0's one-sided window (gets and atomic adds)"
        rule = "one writer at a time, under an exclusive lock" if t.lock else "lock-free"
        print(f"hogwild ({rule}): the parameters live once, in {where}; all {comm.size} ranks "
              f"are workers", flush=True)
    return strategy


def build_easgd(cfg, task, optimizer, comm):
    """``--strategy easgd``: the mode's strategy, with ρ = β/(p·η) unless ``--rho`` is given."""
    t, o = cfg.train, cfg.optim
    p = comm.size - (t.easgd_mode in MASTERED)  # the workers: all ranks but a master
    rho = t.rho if t.rho is not None else BETA / (p * o.lr)  # α = ηρ = β/p at the peak rate
    args = (task.model, optimizer, task.loss, task.count, comm)
    if t.easgd_mode == "sync":
        strategy = SyncEASGD(*args, rho=rho, tau=t.tau, grad_clip=o.grad_clip,
                             bucket_bytes=t.bucket_bytes)
        roles = f"all {comm.size} ranks are workers, each holding the centre"
    elif t.easgd_mode == "async":
        strategy = AsyncEASGD(*args, rho=rho, tau=t.tau, grad_clip=o.grad_clip)
        roles = f"rank 0 is the master, holding the centre on the host; {p} worker(s)"
    else:
        strategy = RoundRobinEASGD(*args, rho=rho, grad_clip=o.grad_clip)
        roles = f"rank 0 is the CPU master; worker j = t mod {p} takes step t"
    if comm.rank == 0:
        local = o.optimizer if o.optimizer != "sgd" else \
            f"SGD with Nesterov momentum {o.momentum:g} (EAMSGD)" if o.momentum else "SGD"
        every = "" if t.easgd_mode == "round-robin" else f", exchanging every {t.tau} step(s)"
        print(f"easgd {t.easgd_mode}: ρ = {rho:.4g}, α = ηρ = {o.lr * rho:.4g} at the peak rate"
              f"{every}; local optimizer {local}; {roles}", flush=True)
    return strategy
