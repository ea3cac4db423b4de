"""One rank of the data-parallel benchmark: DP steps, the compute-only step and DDP, in turns."""

from __future__ import annotations

import functools

import numpy as np

from ... import backend, nn, optim
from ...comm.mesh import Mesh
from ...data.shard import shard
from ...parallel import DataParallel, DataParallelNaive
from ...train.task import Task
from ..timing import Timed, accumulated, alone, stepping, turns

LR = 0.01
LOSS_RTOL, LOSS_ATOL = 1e-5, 1e-6  # float32: a loss near 0 is checked to an absolute error
CHECK_STEPS = 2
sgd = functools.partial(optim.SGD, lr=LR)  # every contender's optimizer: plain SGD, no state


def ddp_backend(device: str, comm) -> str:
    """NCCL where every rank of the node has a GPU of its own, else gloo: NCCL (≥ 2.5) refuses two
    ranks on one GPU ("Duplicate GPU detected"), gloo all-reduces CUDA tensors through the host."""
    if device != "cuda":
        return "gloo"
    import torch

    return "nccl" if comm.local_size <= torch.cuda.device_count() else "gloo"


def torch_step(model, sizes: list[int], host, comm, device: str, ddp_file: str | None = None):
    """A PyTorch SGD step returning its local loss, of ``model``'s twin on this rank's (equal)
    shard, on its GPU with cuda; with ``ddp_file``, in torch DDP (:func:`ddp_backend`)."""
    import torch

    from .. import twins

    torch.set_num_threads(1)
    where = twins.device_for(device)
    if where.type == "cuda":
        torch.cuda.set_device(comm.local_rank % torch.cuda.device_count())
    net = twins.twin_of(model, twins.TorchMLP(sizes), device)
    x, y = (torch.from_numpy(a).to(where) for a in shard(host, comm.rank, comm.size))
    if ddp_file:
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group(ddp_backend(device, comm), init_method=f"file://{ddp_file}",
                                    rank=comm.rank, world_size=comm.size)
        net = torch.nn.parallel.DistributedDataParallel(
            net, device_ids=[x.device] if x.is_cuda else None)
    opt = torch.optim.SGD(net.parameters(), lr=LR)

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss

    return Timed(step, twins.sync_for(device))


def check_losses(dp, ddp, batch, comm) -> list[dict]:
    """The first steps' global mean losses of scratchpar DP and DDP from the same weights."""
    rows = []
    for k in range(CHECK_STEPS):
        ours, mine, total = dp.step(batch)["loss"], np.array([float(ddp())]), np.zeros(1)
        comm.mpi_allreduce(mine, total, "sum", blocking=True)
        theirs = float(total[0]) / comm.size
        rows.append({"step": k + 1, "scratchpar": ours, "ddp": theirs,
                     "abs_err": abs(ours - theirs)})
        if abs(ours - theirs) > LOSS_RTOL * abs(theirs) + LOSS_ATOL:
            raise AssertionError(f"scratchpar DP and torch DDP disagree: {rows[-1]}")
    return rows


def bench_config(comm, spec: dict, cfg: dict, device: str) -> dict:
    """Every contender on one MLP and global batch, from the same weights: DP bucketed and naive,
    compute-only (no messages), one device alone; with ``"ddp_file"``, torch DDP and alone."""
    gen = np.random.default_rng(0)
    model = nn.MLP(spec["sizes"], gen, dtype=np.float32)  # on the device serve() set
    x = gen.standard_normal((spec["batch"], spec["sizes"][0])).astype(np.float32)  # (B, D)
    host = (x, gen.integers(0, spec["sizes"][-1], spec["batch"]))  # (B, D), (B,)
    batch = tuple(map(backend.to_device, host))
    mesh, objective = Mesh(comm), Task(None, model, "sample")  # cross-entropy, pure DP
    bucketed = DataParallel(model, sgd, objective, mesh)
    naive = DataParallelNaive(model, sgd, objective, mesh)
    compute = accumulated(model, sgd(model.parameters()), objective.loss,
                          [shard(batch, comm.rank, comm.size)], objective.count(batch))
    contenders = {"bucketed": stepping(bucketed, batch), "naive": stepping(naive, batch),
                  "compute-only": compute, "alone": alone(compute, comm)}
    check = None
    if cfg["ddp_file"]:
        ddp = torch_step(model, spec["sizes"], host, comm, device, cfg["ddp_file"])
        check = check_losses(bucketed, ddp, batch, comm)
        contenders["torch-ddp"] = ddp
        contenders["torch-alone"] = alone(torch_step(model, spec["sizes"], host, comm, device),
                                          comm)
    timed = turns(comm, contenders, cfg)
    for strategy in (bucketed, naive):
        strategy.close()
    mesh.free()
    return {"loss_check": check, "contenders": timed}


def measure_ranks(comm, cfg: dict) -> dict:
    """Every MLP of ``cfg`` timed on this world (rank 0's result), and the DDP backend."""
    device = backend.device()
    return {"cuda_aware": comm.cuda_aware,  # serve() selected this rank's device
            "ddp_backend": ddp_backend(device, comm) if cfg["ddp_file"] else None,
            "configs": {name: bench_config(comm, spec, cfg, device)
                        for name, spec in cfg["configs"].items()}}
