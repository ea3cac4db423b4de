"""Hogwild: lock-free SGD on one parameter vector that every process of a node maps (Niu et al.
2011, Algorithm 1), and the locked spec beside it (seed 001's "master uses lock")."""

from __future__ import annotations

from ..backend import get_array_module, to_device, to_host
from ..comm.window import SharedArray
from ..data.shard import shard
from ..optim import skipped
from ..optim.guard import backward_verdict


class Hogwild:
    """Every rank is a worker on its rows of each global batch; the parameters live once, in a
    :class:`~scratchpar.comm.window.SharedArray` (flat, host memory) that all of them read and
    write. A step reads the rows its batch touches (``model.touched(batch)``; every row for a
    model without it) into the worker's own copy, backpropagates there, and writes
    θ_v ← θ_v − η g_v for those rows straight into the shared memory (Algorithm 1, line 4, a
    plain SGD step). Nobody waits: two workers may update one coordinate at once and one of the
    two updates may be lost, which sparse problems make rare (Niu et al. 2011, §4).

    With ``lock``, the read–modify–write of the rows happens under the window's exclusive lock,
    one writer at a time: no update is ever lost, at the price of serialized writes."""

    lockstep = False  # a worker judges its own loss; the ranks never wait for each other

    def __init__(self, model, optimizer, loss_fn, count_fn, comm, lock: bool = False):
        self.model, self.optimizer, self.loss_fn, self.comm = model, optimizer, loss_fn, comm
        self.lock = lock
        self.params = model.parameters()
        self.names = [name for name, _ in model.named_parameters()]
        dtype = to_host(self.params[0].data).dtype
        self.shared = SharedArray(comm, sum(p.size for p in self.params), dtype)  # θ, (K,)
        self.views, start = [], 0  # each parameter's slice of θ, in its shape
        for p in self.params:
            self.views.append(self.shared.array[start:start + p.size].reshape(p.shape))
            start += p.size
        if comm.rank == 0:
            for view, p in zip(self.views, self.params):
                view[...] = to_host(p.data)
        self.shared.sync()
        comm.barrier()
        self.shared.sync()

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
        for p, view, (mine, theirs) in zip(self.params, self.views, rows):  # read θ's rows
            p.data[mine] = to_device(view[theirs], dtype=p.dtype)
        self.optimizer.zero_grad()
        mean, norm, finite = backward_verdict(self.loss_fn(self.model, batch), self.params)
        if not finite:
            return skipped(mean, norm)
        steps = [to_host(p.grad[mine] * self.optimizer.lr) if p.grad is not None else None
                 for p, (mine, _) in zip(self.params, rows)]  # η g_v, on the touched rows
        if self.lock:
            with self.shared.exclusive():
                self._write(rows, steps)
        else:
            self._write(rows, steps)
        return {"loss": mean, "grad_norm": norm, "skipped": False}

    def _write(self, rows: list, steps: list) -> None:
        for view, (_, theirs), s in zip(self.views, rows, steps):
            if s is not None:
                view[theirs] -= s  # θ_v ← θ_v − η g_v (Niu et al. 2011, Algorithm 1)

    def shutdown(self) -> None:
        """Collective: every rank's writes are done and visible before anyone reads θ whole."""
        self.shared.sync()
        self.comm.barrier()
        self.shared.sync()

    def gather_model(self) -> None:
        """Every rank's model takes θ (for the held-out evaluation)."""
        self.shutdown()
        for p, view in zip(self.params, self.views):
            get_array_module(p.data).copyto(p.data, to_device(view, dtype=p.dtype))

    def state_dict(self) -> dict | None:
        """Collective: θ copied out between barriers (no rank writes meanwhile), under the
        single-device model's names, on rank 0; ``None`` elsewhere."""
        self.shutdown()
        copy = {name: view.copy() for name, view in zip(self.names, self.views)}
        self.comm.barrier()
        if self.comm.rank != 0:
            return None
        return {"model": copy, "optim": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Rank 0 writes the checkpoint's parameters into θ; every rank waits for it."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optim"])
        self.comm.barrier()
        if self.comm.rank == 0:
            for view, name in zip(self.views, self.names):
                view[...] = to_host(state["model"][name])
        self.shutdown()

    def close(self) -> None:
        """Collective: release the shared memory."""
        self.shared.free()
