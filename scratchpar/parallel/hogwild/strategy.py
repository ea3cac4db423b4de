"""Hogwild: lock-free SGD on one parameter vector that every worker reads and writes (Niu et al.
2011, Algorithm 1)."""

from __future__ import annotations

import math

from ...autograd.precision import wide, widened
from ...backend import get_array_module, to_device, to_host
from ...data.shard import shard
from ...optim import SGD
from ...optim.clip import clip_grad_norm, grad_norm_array
from ...optim.guard import read_scalars, refused
from ..description import Description, Message
from ..strategy import Strategy, whole_model
from .stores import STORES


class Hogwild(Strategy):
    """Every rank is a worker on its rows of each global batch. The parameters live once, as
    θ in a store every worker reads and writes: a node's shared memory (``window="shared"``) or
    rank 0's one-sided window (``"one-sided"``, across nodes); the window is where θ lives, not
    another algorithm. A step reads the rows its batch touches (``model.touched(batch)``; every
    row for a model without it) into the worker's own copy, backpropagates its summed loss
    there, and writes θ_v ← θ_v − γ g_v for those rows into θ (Algorithm 1, line 4, a plain
    SGD step). g is the worker's mean gradient over its n_w units, clipped to ``grad_clip``
    like one device's, and the step is γ = η·n_w/N, the worker's share of the global batch's N
    units, as data parallelism weighs it (g = Σ_w (n_w/N) g_w; γ g is η/N times the worker's
    summed gradient): the W writes of one global batch add up to one device's step on it, to
    first order, so ``--lr`` means the same at any world size. Nobody waits: two workers may
    update one coordinate at once, and in shared memory one of the two updates may be lost,
    which sparse problems make rare (Niu et al. 2011, §4). :class:`LockedHogwild` is the spec
    beside it, where no update is lost.

    The optimizer ``make_optimizer`` builds must be plain SGD (its ``lr`` is η), or a
    :class:`~scratchpar.optim.mixed.MixedPrecision` over it for a model in 16 bits, which
    keeps θ in fp32: it is the master. A worker reads its rows rounded into its model, and
    writes γ g_v in fp32, its 16-bit gradient divided by its own loss scale, which halves on
    its own overflows (Micikevicius et al. 2018, §3).

    Each worker reads N, the units of the whole global batch, to weigh its step: so it is
    handed the whole batch (:meth:`rows` is ``None``) and takes its rows itself."""

    lockstep = False  # a worker judges its own loss; the ranks never wait for each other

    def __init__(self, model, make_optimizer, objective, mesh, /, *, window: str = "shared",
                 grad_clip: float = 0.0):
        comm = whole_model(mesh, type(self).__name__)
        if window not in STORES:
            raise ValueError(f"Hogwild's window is one of {', '.join(STORES)}; got {window!r}")
        super().__init__(model, make_optimizer, objective, mesh, grad_clip=grad_clip)
        rule = getattr(self.optimizer, "inner", self.optimizer)  # mixed precision's: its rule
        if not isinstance(rule, SGD) or rule.momentum or rule.weight_decay:
            raise ValueError("Hogwild writes the plain SGD step θ_v ← θ_v − γ g_v: it needs SGD "
                             "without momentum or weight decay")
        self.names = [name for name, _ in model.named_parameters()]
        self.scaler = getattr(self.optimizer, "scaler", None)
        self.store = STORES[window](comm, [p.shape for p in self.params],  # θ: fp32 under 16 bits
                                    widened(to_host(self.params[0].data).dtype))
        if comm.rank == 0:
            self.store.assign([to_host(p.data) for p in self.params])
        self.store.settle()

    @classmethod
    def describe(cls, shape, world: int, *, window: str = "shared") -> Description:
        """Rank 0, which holds θ in host memory (the shared window every rank of the node
        maps, or the one-sided window) beside its own copy of the model, its gradient and the
        step γg. Plain SGD keeps no state. Through a shared window a step's reads and writes
        are loads and stores. Through the one-sided one they are a Get of the rows a batch
        touches and an Accumulate of −γg to them (every row, for a dense model: the bound here)."""
        p, theta = shape.bytes, shape.widened().bytes  # θ as the masters: fp32 under 16 bits
        sends = () if window == "shared" else (Message("get", "world", theta, 1, "forward"),
                                               Message("accumulate", "world", theta, 1))
        return Description({"parameters": p + theta, "gradients": p, "optimizer": 0,
                            "buffers": theta}, sends, on_host=theta, chunk=shape.largest,
                           arrays=shape.stepped)

    def _rows(self, batch) -> list[tuple]:
        """Per parameter, the rows this batch touches, on the batch's device and on the host
        (``slice(None)``: all of them)."""
        touched = getattr(self.model, "touched", None)
        if touched is None:
            return [(slice(None), slice(None))] * len(self.params)
        rows = touched(batch)
        return [(rows[name], to_host(rows[name])) for name in self.names]

    def step(self, global_batch) -> dict:
        """Read, compute, write, on this rank's rows: ``{"loss", "grad_norm", "skipped"}``, its
        own (a step whose loss or gradient is not finite writes nothing)."""
        batch = shard(global_batch, self.comm.rank, self.comm.size)
        rows = self._rows(batch)
        for k, (p, (mine, theirs)) in enumerate(zip(self.params, rows)):  # read θ's rows
            p.data[mine] = to_device(self.store.read(k, theirs), dtype=p.dtype)
        self.optimizer.zero_grad()
        loss, n = self.sum_loss(batch)  # L_w, summed over the worker's n_w units
        loss.backward()
        xp = get_array_module(loss.data)
        scale = 1.0 / xp.maximum(xp.asarray(n, dtype="float64"), 1.0)
        for p in self.params:
            if p.grad is not None:
                p.grad *= scale  # g = ∇L_w / n_w, the worker's mean gradient
        mean, norm, n, total = read_scalars(loss.data * scale, grad_norm_array(self.params), n,
                                            self.objective.count(global_batch))
        if not (math.isfinite(mean) and math.isfinite(norm)):
            return refused(self.optimizer, mean, norm)
        s = self.optimizer.grad_scale  # S, or 1 without a loss scale
        norm /= s  # ‖S·g‖ / S
        if self.grad_clip > 0:
            clip_grad_norm(self.params, self.grad_clip, norm)
        gamma = self.optimizer.lr * (n / max(total, 1.0)) / s  # γ = η·n_w/N (one worker: η)
        steps = [to_host(wide(p.grad[mine]) * gamma) if p.grad is not None else None
                 for p, (mine, _) in zip(self.params, rows)]  # γ g_v, on the touched rows
        self._write(rows, steps)
        if self.scaler is not None:
            self.scaler.applied()
        return {"loss": mean, "grad_norm": norm, "skipped": False}

    def _write(self, rows: list, steps: list) -> None:
        for k, ((_, theirs), s) in enumerate(zip(rows, steps)):
            if s is not None:
                self.store.subtract(k, theirs, s)  # θ_v ← θ_v − γ g_v (Algorithm 1, line 4)

    def shutdown(self) -> None:
        """Collective: every rank's writes are done and visible before anyone reads θ whole."""
        self.store.settle()

    def values(self) -> list:
        """Collective: θ, one host array per parameter, copied out between barriers (no rank
        writes meanwhile)."""
        self.store.settle()
        copy = self.store.values()
        self.comm.barrier()
        return copy

    def gather_model(self) -> None:
        """Every rank's model takes θ (for the held-out evaluation)."""
        for p, value in zip(self.params, self.values()):
            get_array_module(p.data).copyto(p.data, to_device(value, dtype=p.dtype))

    def state_dict(self) -> dict | None:
        """Collective: θ under the single-device model's names, on rank 0; ``None`` elsewhere."""
        copy = dict(zip(self.names, self.values()))
        if self.comm.rank != 0:
            return None
        return {"model": copy, "optim": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Rank 0 writes the checkpoint's parameters into θ; every rank waits for it."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optim"])
        self.store.settle()
        if self.comm.rank == 0:
            self.store.assign([to_host(state["model"][name]) for name in self.names])
        self.store.settle()

    def close(self) -> None:
        """Collective: release θ's memory."""
        self.store.free()
