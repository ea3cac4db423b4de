"""One rank of the data-parallel benchmark: DP steps, the compute-only step and DDP, in turns."""

from __future__ import annotations

import sys

import numpy as np

from ... import backend, nn, optim
from ...allocator import keep_freed_memory
from ...autograd import Tensor
from ...autograd import functional as F
from ...data.shard import shard
from ...parallel import DataParallel, DataParallelNaive
from ..timing import Timed, alone, turns

LR = 0.01
LOSS_RTOL, LOSS_ATOL = 1e-5, 1e-6  # float32: a loss near 0 is checked to an absolute error
CHECK_STEPS = 2


def loss_fn(model, batch, reduction: str = "mean"):
    x, y = batch
    return F.cross_entropy(model(Tensor(x)), y, reduction=reduction)


def count_fn(batch) -> int:
    return len(batch[1])


def compute_only(model, optimizer, batch, comm) -> Timed:
    """This rank's share of a DP step with no communication: backward on its shard, 1/N, SGD."""
    local, scale = shard(batch, comm.rank, comm.size), 1.0 / len(batch[1])
    params = model.parameters()

    def step():
        optimizer.zero_grad()
        loss = loss_fn(model, local, reduction="sum")
        loss.backward()
        loss.item()
        for p in params:
            p.grad *= scale
        optimizer.step()

    return Timed(step, backend.sync)


def torch_twin(model, sizes: list[int], batch, comm, device: str):
    """PyTorch's twin of the MLP ``model`` and this rank's shard of the host ``batch``, on the
    GPU of this rank when ``device`` is cuda (the one CuPy uses), else on the CPU."""
    import torch

    from .. import twins

    torch.set_num_threads(1)
    where = twins.device_for(device)
    if where.type == "cuda":
        torch.cuda.set_device(comm.local_rank % torch.cuda.device_count())
    net = twins.load_from(twins.TorchMLP(sizes).to(where), model)
    x, y = (torch.from_numpy(a).to(where) for a in shard(batch, comm.rank, comm.size))
    return net, x, y, twins.sync_for(device)


def torch_step(net, x, y, wait) -> Timed:
    """A PyTorch SGD step of ``net`` on this rank's shard (x, y): returns its local loss."""
    import torch

    opt = torch.optim.SGD(net.parameters(), lr=LR)

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss

    return Timed(step, wait)


def ddp_backend(device: str, comm) -> str:
    """NCCL where every rank of the node has a GPU of its own; gloo on the CPU, and on CUDA
    tensors where ranks share a GPU: NCCL (≥ 2.5) refuses two ranks on one GPU ("Duplicate GPU
    detected", ncclInvalidUsage), while gloo all-reduces CUDA tensors through host memory, the
    path scratchpar stages through when MPI is not CUDA-aware."""
    if device != "cuda":
        return "gloo"
    import torch

    return "nccl" if comm.local_size <= torch.cuda.device_count() else "gloo"


def ddp_step(model, sizes: list[int], batch, comm, init_file: str, device: str) -> Timed:
    """A step of torch DDP (file rendezvous, :func:`ddp_backend`) on a twin of the MLP
    ``model``: returns its local loss. The shards must be equal, so that DDP's mean of rank
    means is the global mean."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    net, x, y, wait = torch_twin(model, sizes, batch, comm, device)
    if not dist.is_initialized():
        dist.init_process_group(ddp_backend(device, comm), init_method=f"file://{init_file}",
                                rank=comm.rank, world_size=comm.size)
    net = DistributedDataParallel(net, device_ids=[x.device] if x.is_cuda else None)
    return torch_step(net, x, y, wait)


def rank_mean(comm, value: float) -> float:
    total = np.zeros(1)
    comm.mpi_allreduce(np.array([value]), total, "sum", blocking=True)
    return float(total[0]) / comm.size


def check_losses(dp, ddp, batch, comm) -> list[dict]:
    """The first steps' global mean losses of scratchpar DP and DDP from the same weights."""
    rows = []
    for k in range(CHECK_STEPS):
        ours, theirs = dp.step(batch)["loss"], rank_mean(comm, float(ddp()))
        rows.append({"step": k + 1, "scratchpar": ours, "ddp": theirs,
                     "abs_err": abs(ours - theirs)})
        if abs(ours - theirs) > LOSS_RTOL * abs(theirs) + LOSS_ATOL:
            raise AssertionError(f"scratchpar DP and torch DDP disagree: {rows[-1]}")
    return rows


def bench_config(comm, cfg: dict, timing: dict, device: str) -> dict:
    """Every contender on one MLP and global batch, from the same weights: scratchpar's DP
    bucketed and naive, the compute-only step, one device alone (rank 0 while the others
    sleep), and with ``"ddp_file"`` torch DDP and torch on one device."""
    gen = np.random.default_rng(0)
    model = nn.MLP(cfg["sizes"], gen, dtype=np.float32)  # on the device serve() set
    x = gen.standard_normal((cfg["batch"], cfg["sizes"][0])).astype(np.float32)  # (B, D)
    host = (x, gen.integers(0, cfg["sizes"][-1], cfg["batch"]))  # (B, D), (B,)
    batch = tuple(map(backend.to_device, host))
    optimizer = optim.SGD(model.parameters(), LR)
    bucketed = DataParallel(model, optimizer, loss_fn, count_fn, comm)
    naive = DataParallelNaive(model, optimizer, loss_fn, count_fn, comm)
    contenders = {"bucketed": Timed(lambda: bucketed.step(batch), backend.sync),
                  "naive": Timed(lambda: naive.step(batch), backend.sync),
                  "compute-only": compute_only(model, optimizer, batch, comm),
                  "alone": alone(compute_only(model, optimizer, batch, comm), comm)}
    result = {"loss_check": None}
    if cfg["ddp"] and timing["ddp_file"]:
        ddp = ddp_step(model, cfg["sizes"], host, comm, timing["ddp_file"], device)
        result["loss_check"] = check_losses(bucketed, ddp, batch, comm)
        contenders["torch-ddp"] = ddp
        contenders["torch-alone"] = alone(
            torch_step(*torch_twin(model, cfg["sizes"], host, comm, device)), comm)
    result["contenders"] = turns(comm, contenders, timing["repeats"], timing["warmup"])
    return result


def measure(comm, cfg: dict) -> dict:
    device = backend.device()
    result = {"world_size": comm.size, "malloc": keep_freed_memory(),  # serve() set it first
              "cuda_aware": comm.cuda_aware,
              "ddp_backend": ddp_backend(device, comm) if cfg["ddp_file"] else None,
              "configs": {}}
    for name, spec in cfg["configs"].items():
        if comm.rank == 0:
            print(f"  n={comm.size}, {name}: MLP {spec['sizes']}, batch {spec['batch']}",
                  file=sys.stderr, flush=True)
        result["configs"][name] = bench_config(comm, spec, cfg, device)
    return result
