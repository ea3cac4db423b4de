"""One rank of the data-parallel benchmark: DP steps, the compute-only step and DDP, in turns.

Run by ``python -m scratchpar.bench dp`` under ``mpiexec -n N``; not meant to be called by hand.
Every contender trains the same MLP on the same global batch (float32, cross-entropy, SGD); a
sample is one step timed from a barrier, the slowest rank's time. The one-device baselines run in
the same job, in turn with the others: rank 0 steps on its shard alone while the other ranks
sleep, so a machine whose speed drifts (a shared host) weighs on both sides of an efficiency
alike. PyTorch is imported only when ``--ddp-file`` asks for DistributedDataParallel.

With ``--device`` other than cpu, every rank takes the GPU of its node-local rank (ranks sharing
one GPU each queue on a stream of their own), scratchpar's models and batches live there, and
every timed step ends with a wait for the device. PyTorch's twins run on that GPU too (cuda).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from scratchpar import backend, nn, optim
from scratchpar.allocator import keep_freed_memory
from scratchpar.autograd import Tensor
from scratchpar.autograd import functional as F
from scratchpar.bench.collectives_worker import slowest, sync
from scratchpar.bench.mpijob import write_result
from scratchpar.bench.timing import Timed, on_host
from scratchpar.comm.mpi import Communicator
from scratchpar.data.shard import shard
from scratchpar.parallel import DataParallel, DataParallelNaive

LR = 0.01
LOSS_RTOL, LOSS_ATOL = 1e-5, 1e-6  # float32: a loss near 0 is checked to an absolute error
CHECK_STEPS = 2
IDLE_POLL_S = 2e-4  # how often a rank sleeping through a one-device baseline looks for its cue
SOLO = ("alone", "torch-alone")  # rank 0's time only: the other ranks sleep through these


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--configs", required=True,
                        help='JSON: {name: {"sizes": [...], "batch": B, "ddp": bool}}')
    parser.add_argument("--repeats", type=int, required=True, help="timed steps per contender")
    parser.add_argument("--warmup", type=int, required=True, help="untimed steps per contender")
    parser.add_argument("--ddp-file", help="add torch DDP, rendezvous through this new file")
    parser.add_argument("--out", required=True, help="rank 0 writes its JSON here")
    parser.add_argument("--device", choices=backend.DEVICES, required=True,
                        help="where scratchpar's arrays live; each rank takes its node-local GPU")
    return parser.parse_args(argv)


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


def alone(step: Timed, comm) -> Timed:
    """Rank 0 runs ``step`` by itself, one core busy as on one device, while the other ranks
    sleep until its message wakes them (a spinning wait would load their cores)."""
    flag = np.zeros(1)

    def run():
        if comm.rank == 0:
            step()  # the work and its wait
            for r in range(1, comm.size):
                comm.send(flag, r)
        else:
            request = comm.irecv(flag, 0)
            while not comm.test_all([request]):
                time.sleep(IDLE_POLL_S)

    return Timed(run, on_host)


def torch_twin(model, sizes: list[int], batch, comm, device: str):
    """PyTorch's twin of the MLP ``model`` and this rank's shard of the host ``batch``, on the
    GPU of this rank when ``device`` is cuda (the one CuPy uses), else on the CPU."""
    import torch

    from scratchpar.bench import twins

    torch.set_num_threads(1)
    where = twins.device_for(device)
    if where.type == "cuda":
        torch.cuda.set_device(comm.local_rank % torch.cuda.device_count())
    net = twins.load_from(twins.TorchMLP(sizes).to(where), model)
    x, y = (torch.from_numpy(a).to(where) for a in shard(batch, comm.rank, comm.size))
    return net, x, y, twins.sync_for(device)


def torch_step(model, sizes: list[int], batch, comm, device: str) -> Timed:
    """A one-device PyTorch step (no DDP) on this rank's shard, from ``model``'s weights."""
    import torch

    net, x, y, wait = torch_twin(model, sizes, batch, comm, device)
    opt = torch.optim.SGD(net.parameters(), lr=LR)

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()

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
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    net, x, y, wait = torch_twin(model, sizes, batch, comm, device)
    if not dist.is_initialized():
        dist.init_process_group(ddp_backend(device, comm), init_method=f"file://{init_file}",
                                rank=comm.rank, world_size=comm.size)
    net = DistributedDataParallel(net, device_ids=[x.device] if x.is_cuda else None)
    opt = torch.optim.SGD(net.parameters(), lr=LR)

    def step() -> float:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    return Timed(step, wait)


def rank_mean(comm, value: float) -> float:
    total = np.zeros(1)
    comm.mpi_allreduce(np.array([value]), total, "sum", blocking=True)
    return float(total[0]) / comm.size


def check_losses(dp, ddp, batch, comm) -> list[dict]:
    """The first steps' global mean losses of scratchpar DP and DDP from the same weights."""
    rows = []
    for k in range(CHECK_STEPS):
        ours, theirs = dp.step(batch)["loss"], rank_mean(comm, ddp())
        rows.append({"step": k + 1, "scratchpar": ours, "ddp": theirs,
                     "abs_err": abs(ours - theirs)})
        if abs(ours - theirs) > LOSS_RTOL * abs(theirs) + LOSS_ATOL:
            raise AssertionError(f"scratchpar DP and torch DDP disagree: {rows[-1]}")
    return rows


def turns(comm, contenders: dict[str, Timed], repeats: int, warmup: int) -> dict:
    """Median slowest-rank seconds per step of each contender, the contenders taking turns, each
    step timed up to the end of its wait for the device (a one-device baseline counts rank 0's
    time: the others only sleep)."""
    items = list(contenders.items())
    for _ in range(warmup):
        for _, step in items:
            sync(comm)
            step()
    samples = {name: [] for name, _ in items}
    for r in range(repeats):
        k = r % len(items)
        for name, step in items[k:] + items[:k]:
            sync(comm)
            start = time.perf_counter()
            step()
            took = time.perf_counter() - start
            samples[name].append(0.0 if name in SOLO and comm.rank else took)
    worst = slowest(comm, [samples[name] for name, _ in items])  # (C, R)
    return {name: {"median_s": float(np.median(worst[i])), "samples_s": worst[i].tolist()}
            for i, (name, _) in enumerate(items)}


def bench_config(comm, cfg: dict, args) -> dict:
    gen = np.random.default_rng(0)
    model = nn.MLP(cfg["sizes"], gen, dtype=np.float32)  # on the device set in main
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
    if cfg["ddp"] and args.ddp_file:
        ddp = ddp_step(model, cfg["sizes"], host, comm, args.ddp_file, args.device)
        result["loss_check"] = check_losses(bucketed, ddp, batch, comm)
        contenders["torch-ddp"] = ddp
        contenders["torch-alone"] = alone(
            torch_step(model, cfg["sizes"], host, comm, args.device), comm)
    result["contenders"] = turns(comm, contenders, args.repeats, args.warmup)
    return result


def main(argv=None) -> int:
    args = parse_args(argv)
    malloc = keep_freed_memory()
    comm = Communicator()
    backend.set_device(args.device, comm.local_rank)
    result = {"world_size": comm.size, "malloc": malloc, "cuda_aware": comm.cuda_aware,
              "ddp_backend": ddp_backend(args.device, comm) if args.ddp_file else None,
              "configs": {}}
    for name, cfg in json.loads(args.configs).items():
        if comm.rank == 0:
            print(f"  n={comm.size}, {name}: MLP {cfg['sizes']}, batch {cfg['batch']}",
                  file=sys.stderr, flush=True)
        result["configs"][name] = bench_config(comm, cfg, args)
    return write_result(comm, args.out, result)


if __name__ == "__main__":
    sys.exit(main())
