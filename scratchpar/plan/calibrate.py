"""Calibration: this machine's constants, measured through the engine's own paths.

- messages: the one-way time of a message between rank 0 and another rank, half a round trip
  through the Communicator, at sizes from 8 B up; α and β fitted per link (a rank on rank
  0's node, and one on another node where there is one);
- a reduction: ``a += b`` over n bytes, the local work of every reduce step, as γ per byte;
- compute: FLOP/s of a square matrix product and bytes/s of an elementwise op on the device,
  in the dtype asked;
- the engine's kernels (``kernels.py``, ``engine``): square products from 16 up, fitted to
  η·R·n/(n + n½) for η and n½; and an op's own seconds, forward and backward, from a chain of
  ops on one element each through the autograd graph;
- memory: what a rank may hold (``train/memory.py``), and what a process maps before its
  arrays;
- the engine's own cost per collective call: an all-reduce of 8 bytes among every rank,
  less what α and β price its messages at;
- the engine's own cost per array an update steps: AdamW's guarded step (its norm, its
  ops) over many small parameters, on every rank at once as a step runs it, per array it
  touches (each parameter and its two moments).

Every time is the median of repeats after a warm-up, every rank starting each together
(``timing.sync``).
"""

from __future__ import annotations

import socket
from datetime import date

import numpy as np

from .. import backend
from ..autograd import Tensor
from ..comm import collectives
from ..nn.module import Parameter
from ..optim import AdamW, guarded_step
from ..parallel.description import Message
from ..timing import clocked, medians, slowest, sync
from ..train.memory import PROCESS_BYTES, available
from .fit import alpha_beta, least_squares, per_unit
from .kernels import Kernels
from .messages import seconds
from .profile import Device, Engine, Link, Profile, Reduce, dump

SIZES = [8 << (2 * k) for k in range(11)]  # 8 B … 8 MiB, ×4 apart
QUICK_SIZES = SIZES[::2][:5]  # 8 B … 512 KiB, ×16 apart: large enough for β to show
ARRAYS = 64  # small parameters the update's cost per array is timed over
MATMUL = 1024  # n of the n×n product timed for FLOP/s (quick: a quarter)
ELEMENTS = 1 << 24  # of each array of the elementwise op timed for bytes/s (quick: 1/16)
PRODUCTS = [16 << k for k in range(6)]  # n of the n×n products the engine's η and n½ fit on
CHAIN = 64  # ops of the chain an op's own seconds are timed over


def timed(run, repeats: int, start=lambda: None) -> float:
    """The median seconds of ``run()`` over ``repeats`` calls after one untimed call;
    ``start()`` runs before each, untimed."""
    return medians(clocked(run), repeats, 1, start)[0]


def one_way(comm, peer: int, nbytes: int, repeats: int) -> float:
    """Half the round trip of an ``nbytes`` message between rank 0 and ``peer`` (seconds, on
    rank 0; the other ranks wait at the barriers)."""
    buf = backend.xp_default().zeros(nbytes, dtype=np.uint8)

    def round_trip():
        if comm.rank == 0:
            comm.send(buf, peer)
            comm.recv(buf, peer)
        elif comm.rank == peer:
            comm.recv(buf, 0)
            comm.send(buf, 0)

    return timed(round_trip, repeats, lambda: sync(comm)) / 2


def link(comm, peer: int, sizes: list[int], repeats: int) -> dict:
    """α, β and the residual of the link between rank 0 and ``peer``, with every timing. A
    coefficient that noise drove to 0 or below is read off the ends instead: α as the
    smallest message's time, β as the largest's per byte."""
    seconds = [one_way(comm, peer, n, repeats) for n in sizes]
    if comm.rank != 0:
        return {}
    fitted = alpha_beta([(1, n) for n in sizes], seconds)
    if fitted["alpha_s"] <= 0 or fitted["beta_s_per_byte"] <= 0:
        fitted.update(alpha_s=seconds[0], beta_s_per_byte=seconds[-1] / sizes[-1],
                      read_off_the_ends=True)
    return {"peer": peer, "sizes": sizes, "seconds": seconds, **fitted}


def collective_call(comm, link_found: dict, gamma_s_per_byte: float, repeats: int) -> dict:
    """The engine's all-reduce of one float64 among every rank, and what it costs beyond the
    messages the model prices (messages.py): the cost of a call, rank 0's figure."""
    buf = backend.xp_default().zeros(1)
    took = timed(lambda: collectives.all_reduce_(comm, buf), repeats, lambda: sync(comm))
    if comm.rank != 0:
        return {}
    link = Link(link_found["alpha_s"], link_found["beta_s_per_byte"])
    priced = seconds(Message("all-reduce", "world", 8, 1), comm.size, link, gamma_s_per_byte)
    return {"ranks": comm.size, "seconds": took, "priced_s": priced,
            "call_s": max(0.0, took - priced)}


def update_array(comm, repeats: int) -> dict:
    """Seconds per array of AdamW's guarded step over ``ARRAYS`` parameters of 16 elements,
    each with its gradient and two moments (3 arrays each), every rank stepping at once: the
    slowest rank's, where ranks share a node's cores."""
    gen = np.random.default_rng(0)
    params = [Parameter(backend.to_device(gen.standard_normal(16).astype(np.float32)))
              for _ in range(ARRAYS)]
    for p in params:
        p.grad = backend.xp_default().ones_like(p.data)
    optimizer = AdamW(params, lr=1e-6)
    mine = timed(lambda: guarded_step(optimizer, params, 0.0), repeats, lambda: sync(comm))
    took = float(slowest(comm, [mine])[0])
    return {"arrays": 3 * ARRAYS, "seconds": took, "array_s": took / (3 * ARRAYS)}


def peers(comm) -> tuple[int | None, int | None]:
    """A rank on rank 0's node other than 0, and a rank on another node (None: there is none)."""
    hosts = comm.allgather_obj(socket.gethostname(), "calibration hosts")
    same = next((r for r in range(1, comm.size) if hosts[r] == hosts[0]), None)
    other = next((r for r in range(1, comm.size) if hosts[r] != hosts[0]), None)
    return same, other


def reduction(sizes: list[int], repeats: int) -> dict:
    """γ: seconds per byte of ``a += b`` on the device, float32, fitted over ``sizes``."""
    xp = backend.xp_default()
    seconds = []
    for n in sizes:
        a, b = xp.ones(max(n // 4, 1), np.float32), xp.ones(max(n // 4, 1), np.float32)
        seconds.append(timed(lambda a=a, b=b: xp.add(a, b, out=a), repeats))
    fitted = per_unit(sizes, seconds)
    if fitted["per_unit_s"] <= 0:  # noise: the largest size's time per byte
        fitted.update(per_unit_s=seconds[-1] / sizes[-1], read_off_the_ends=True)
    return {"sizes": sizes, "seconds": seconds, **fitted}


def compute(dtype, n: int, elements: int, repeats: int) -> dict:
    """FLOP/s of an n×n by n×n product (2n³ FLOP), and bytes/s of c = a + b over ``elements``
    each (3 arrays moved; large enough to leave the caches, as activations do)."""
    xp = backend.xp_default()
    gen = np.random.default_rng(0)
    a, b = (backend.to_device(gen.standard_normal((n, n)).astype(dtype)) for _ in range(2))
    c = xp.empty_like(a)
    matmul = timed(lambda: xp.matmul(a, b, out=c), repeats)
    x, y, z = (xp.ones(elements, dtype) for _ in range(3))
    add = timed(lambda: xp.add(x, y, out=z), repeats)
    return {"n": n, "flops": 2 * n ** 3 / matmul, "elements": elements,
            "bytes_per_s": 3 * x.nbytes / add}


def kernels(dtype, rate: float, repeats: int, quick: bool) -> dict:
    """The engine's η and n½, fitted on n×n products as t = t₀ + 2n³/(ηR) + 2n²·n½/(ηR)
    (a call's own t₀, then ``kernels.product_s`` at s = n), with R the large product's FLOP/s
    (:func:`compute`); and an op's own seconds, forward and backward, from a ``CHAIN`` of
    additions on one element through the autograd graph, per op and pass."""
    xp, gen = backend.xp_default(), np.random.default_rng(0)
    sizes, seconds = PRODUCTS[:4] if quick else PRODUCTS, []
    for n in sizes:
        a, b = (backend.to_device(gen.standard_normal((n, n)).astype(dtype)) for _ in range(2))
        c = xp.empty_like(a)
        seconds.append(timed(lambda a=a, b=b, c=c: xp.matmul(a, b, out=c), repeats))
    (_, inverse, half), rms = least_squares([(1.0, 2 * n ** 3, 2 * n ** 2) for n in sizes],
                                            seconds)
    efficiency = min(1.0, 1 / float(inverse * rate)) if inverse > 0 else 1.0
    x = Tensor(xp.ones(1, dtype), requires_grad=True)

    def chain():
        y = x
        for _ in range(CHAIN):
            y = y + x
        y.sum().backward()

    return {"sizes": sizes, "seconds": seconds, "efficiency": efficiency,
            "half_size": max(0.0, float(half / inverse)) if inverse > 0 else 0.0,
            "launch_s": timed(chain, repeats) / (2 * CHAIN), "rms_rel_residual": rms}


def device_memory(device: str, ranks_on_node: int) -> tuple[str, int]:
    """The device's name and the bytes a rank may hold on it."""
    if device == "cuda":
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        return f"cuda ({name})", int(cupy.cuda.runtime.memGetInfo()[1])
    return f"{device} ({socket.gethostname()})", available(ranks_on_node)[0]


def calibrate(comm, device: str, dtype: str = "float32", quick: bool = False) -> tuple:
    """(the Profile, every measurement) of this world; both are rank 0's, None elsewhere."""
    sizes, repeats = (QUICK_SIZES, 3) if quick else (SIZES, 15)
    same, other = peers(comm)
    node = link(comm, same if same is not None else other, sizes, repeats)
    network = link(comm, other, sizes, repeats) if other is not None and same is not None \
        else None
    reduce = reduction(sizes, repeats) if comm.rank == 0 else None
    gamma, fitted = comm.allgather_obj(None if reduce is None else (
        reduce["per_unit_s"], network or node), "the fitted constants")[0]
    call = collective_call(comm, fitted, gamma, repeats)
    update = update_array(comm, repeats)
    if comm.rank != 0:
        return None, None
    found = {"node": node, "network": network, "reduce": reduce, "engine": call,
             "update": update,
             "compute": compute(np.dtype(dtype), MATMUL // 4 if quick else MATMUL,
                                ELEMENTS // 16 if quick else ELEMENTS, repeats)}
    found["kernels"] = kernels(np.dtype(dtype), found["compute"]["flops"], repeats, quick)
    name, memory = device_memory(device, comm.local_size)
    profile = Profile(
        name=f"{comm.size} ranks, {comm.local_size} per node, {name}",
        source=f"measured by python -m scratchpar.plan calibrate on {date.today()}"
               f"{' (quick)' if quick else ''}, {dtype}",
        ranks_per_node=comm.local_size,
        device=Device(name, memory, found["compute"]["flops"],
                      found["compute"]["bytes_per_s"]),
        node=Link(node["alpha_s"], node["beta_s_per_byte"]),
        network=None if network is None else Link(network["alpha_s"],
                                                  network["beta_s_per_byte"]),
        reduce=Reduce(found["reduce"]["per_unit_s"]),
        engine=Engine(PROCESS_BYTES, call["call_s"], update["array_s"]),
        kernels=Kernels("engine", *(found["kernels"][k] for k in ("efficiency", "half_size",
                                                                   "launch_s"))))
    return profile, found


def profile_toml(comm, cfg: dict) -> str | None:
    """A benchmark job's calibration (``jobs/mpijob.py``; ``cfg``: ``device``, ``quick``),
    measured as ``python -m scratchpar.plan calibrate`` measures it: rank 0's profile as TOML,
    None elsewhere."""
    profile, _ = calibrate(comm, cfg["device"], "float32", cfg["quick"])
    return dump(profile) if comm.rank == 0 else None
