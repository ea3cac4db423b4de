"""ZeRO-Offload: the optimizer's state and a master copy of the shards live in host memory."""

from __future__ import annotations

import time

import numpy as np

from ...backend import get_array_module, sync, to_host
from ...optim import guarded_step
from .flat import Shard
from .update import state_arrays


class HostUpdate:
    """The update on the host (Ren et al. 2021, §4): the device runs forward and backward and
    sends each group's reduced gradient chunk down as its bucket finishes. The host steps its
    master shards (NumPy) with the optimizer and its state, and sends the new shards back up.

    A chunk goes back up when the device next needs it (:meth:`upload`): stage 1 and 2 upload
    group k and start its all-gather before uploading group k + 1, stage 3 uploads a layer's
    chunk as its gather starts, behind the layer before it. On a GPU those copies overlap the
    collectives and the compute in flight, and with ``offload`` the next step's start overlaps
    the previous update's copies. On a machine without a GPU the device is NumPy too. Every copy
    still happens, so the path is the one a GPU takes. ``copy_s`` sums the seconds spent
    copying, both ways."""

    offloaded = True

    def __init__(self, shards, make_optimizer):
        self.device = shards  # the device's chunks of the parameters, refreshed after a step
        self.shards = [Shard(np.array(to_host(s.data), copy=True)) for s in shards]  # masters
        self.optimizer = make_optimizer(self.shards)
        self.copy_s = 0.0
        self.pending: set[int] = set()  # groups whose new master chunk the device lacks

    def receive(self, k: int, chunk, copy: bool = True) -> None:
        """Copy group k's reduced gradient chunk to the host (always a copy)."""
        start = time.perf_counter()
        self.shards[k].grad = np.array(to_host(chunk), copy=True)
        self.copy_s += time.perf_counter() - start

    def step(self, loss, norm, grad_clip: float) -> dict:
        """Clip and step the master shards on the host, then copy them up to the device."""
        metrics = guarded_step(self.optimizer, self.shards, loss, grad_clip, norm)
        if not metrics["skipped"]:
            self.pending = set(range(len(self.shards)))
        return metrics

    def upload(self, k: int) -> None:
        """Group k's device chunk ← its master chunk, if the device does not have it yet."""
        if k in self.pending:
            start = time.perf_counter()
            device = self.device[k].data
            device[...] = get_array_module(device).asarray(self.shards[k].data)
            sync()
            self.copy_s += time.perf_counter() - start
            self.pending.discard(k)

    def flush(self) -> None:
        """Every pending chunk up to the device (before the device's chunks are read whole)."""
        for k in sorted(self.pending):
            self.upload(k)

    def refresh(self) -> None:
        """The master shards ← the device's chunks (after parameters were loaded there)."""
        for device, master in zip(self.device, self.shards):
            master.data[...] = to_host(device.data)
        self.pending = set()

    def held(self) -> dict[str, list]:
        """Everything here is host memory: the masters, their gradients, the optimizer's."""
        return {"host": [s.data for s in self.shards] + [s.grad for s in self.shards]
                + state_arrays(self.optimizer), "host scratch": self.optimizer.work_arrays()}
