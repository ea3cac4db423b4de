"""The synchronous parameter server: the spec of the family, equal to one device.

Ranks 0 … S−1 are servers, the rest W workers. Each step, worker w backpropagates its summed
loss L_w on its rows of the global batch (``shard``) and pushes, to each server s, its gradient's
keys in s's range and the pair [L_w, n_w]. Server s waits for every worker, sums (in worker
order), scales by 1/N with N = Σ n_w, and steps its range's optimizer; the servers agree on the
global gradient norm for clipping in one all-reduce among themselves. Then every worker pulls
every range back, and server 0 sends the step's metrics. (Dean et al. 2012, §4.1; Li et al.
2014, §3: push and pull of key ranges.) A server keeps its range on the host, as seed 001's CPU
master does, whatever device the workers compute on.
"""

from __future__ import annotations

import numpy as np

from ...backend import get_array_module, to_device, to_host
from ...comm import collectives
from ...comm.states import gather_states
from ...data.shard import shard
from ...nn.module import Parameter
from ...optim import guarded_step
from .ranges import KeyRanges

PUSH, HEADER, PULL, METRICS = 1, 2, 3, 4  # tags, on the strategy's own dup of the world


class SyncParameterServer:
    """``step(global_batch) -> metrics`` on every rank: a server round on servers, a worker's
    push and pull on workers. ``make_optimizer(params)`` builds a server's optimizer over its
    one flat range (any elementwise optimizer then equals one device's)."""

    def __init__(self, model, make_optimizer, loss_fn, count_fn, comm, servers: int = 1,
                 grad_clip: float = 0.0):
        if not 1 <= servers < comm.size:
            raise ValueError(f"a parameter server needs 1 ≤ servers < ranks: {servers} servers "
                             f"on {comm.size} ranks leave no worker")
        self.model, self.loss_fn, self.count_fn = model, loss_fn, count_fn
        self.servers, self.workers, self.grad_clip = servers, comm.size - servers, grad_clip
        self.params = model.parameters()
        self.ranges = KeyRanges([p.size for p in self.params], servers)
        self.comm = comm.dup(name="ps")  # its tags never meet another subsystem's
        self.is_server = comm.rank < servers
        self.group = comm.split(0 if self.is_server else 1, name="ps servers" if self.is_server
                                else "ps workers")
        if self.is_server:
            host = [to_host(p.data) for p in self.params]  # the server's range lives on the host
            self.flat = Parameter(self.ranges.gather(host, comm.rank))  # (K_s,)
            self.optimizer = make_optimizer([self.flat])
        else:
            self.optimizer = make_optimizer(self.params)  # the loop sets its lr; never steps

    def close(self) -> None:
        """Collective: free the communicators this strategy made."""
        self.comm.free()
        self.group.free()

    def step(self, global_batch) -> dict:
        return self._serve() if self.is_server else self._work(global_batch)

    # -- a worker -------------------------------------------------------------------------------
    def _work(self, global_batch) -> dict:
        w = self.comm.rank - self.servers
        batch = shard(global_batch, w, self.workers)
        for p in self.params:
            p.grad = None
        loss = self.loss_fn(self.model, batch, reduction="sum")
        loss.backward()
        xp = get_array_module(loss.data)
        grads = [xp.zeros_like(p.data) if p.grad is None else xp.ascontiguousarray(p.grad)
                 for p in self.params]
        header = xp.stack([xp.asarray(loss.data, dtype="float64"),
                           xp.asarray(self.count_fn(batch), dtype="float64")])  # [L_w, n_w]
        sends = [self.comm.isend(self.ranges.gather(grads, s), s, PUSH) for s in
                 range(self.servers)] + [self.comm.isend(header, s, HEADER)
                                         for s in range(self.servers)]
        pulled = [xp.empty(n, self.params[0].dtype) for n in self.ranges.lengths]
        metrics = np.empty(3)  # [loss, grad_norm, skipped] from server 0
        self.comm.wait_all(sends + [self.comm.irecv(buf, s, PULL) for s, buf in enumerate(pulled)]
                           + [self.comm.irecv(metrics, 0, METRICS)])
        for s, buf in enumerate(pulled):
            self.ranges.scatter(buf, [p.data for p in self.params], s)
        return {"loss": float(metrics[0]), "grad_norm": float(metrics[1]),
                "skipped": bool(metrics[2])}

    # -- a server -------------------------------------------------------------------------------
    def _serve(self) -> dict:
        s, workers = self.comm.rank, range(self.servers, self.comm.size)
        pushes = {w: np.empty(self.ranges.lengths[s], self.flat.dtype) for w in workers}
        headers = {w: np.empty(2) for w in workers}
        self.comm.wait_all([self.comm.irecv(pushes[w], w, PUSH) for w in workers]
                           + [self.comm.irecv(headers[w], w, HEADER) for w in workers])
        loss, units = sum(headers[w] for w in workers)  # Σ L_w, N
        scale = 1.0 / max(units, 1.0)
        self.flat.grad = sum(pushes[w] for w in workers) * scale  # (K_s,): ∇(Σ L_w)/N
        squares = np.array([(self.flat.grad.astype("float64") ** 2).sum()])
        collectives.all_reduce_(self.group, squares)  # ‖g‖² over every server's range
        metrics = guarded_step(self.optimizer, [self.flat], loss * scale, self.grad_clip,
                               norm=np.sqrt(squares[0]))
        sends = [self.comm.isend(self.flat.data, w, PULL) for w in workers]
        if s == 0:
            report = np.array([metrics["loss"], metrics["grad_norm"], float(metrics["skipped"])])
            sends += [self.comm.isend(report, w, METRICS) for w in workers]
        self.comm.wait_all(sends)
        return metrics

    # -- checkpoints: the whole model, under the single-device model's names ----------------------
    def state_dict(self) -> dict | None:
        """Collective over the servers: the whole model and optimizer state on rank 0 (server
        0), keyed as one device keys them, so any strategy resumes from it; ``None`` elsewhere."""
        if not self.is_server:
            return None
        parts = gather_states(self.group, {"param": self.flat.data, **self.optimizer.state_dict()},
                              np, "server ranges")
        if parts is None:
            return None
        names = [name for name, _ in self.model.named_parameters()]
        optim = {"step_count": parts[0]["step_count"], "lr": parts[0]["lr"]}
        for name in self.optimizer.buffers:
            if f"{name}.0" in parts[0]:  # created on the first step
                whole = self._join([part[f"{name}.0"] for part in parts])
                optim.update({f"{name}.{i}": a for i, a in enumerate(whole)})
        for name in self.optimizer.counters:
            if f"{name}.0" in parts[0]:
                optim.update({f"{name}.{i}": parts[0][f"{name}.0"] for i in range(len(names))})
        return {"model": dict(zip(names, self._join([part["param"] for part in parts]))),
                "optim": optim}

    def _join(self, ranges: list) -> list:
        """Per-parameter host arrays from every server's flat range, in server order."""
        arrays = [np.empty(p.shape, np.dtype(p.dtype)) for p in self.params]
        for s, flat in enumerate(ranges):
            self.ranges.scatter(flat, arrays, s)
        return arrays

    def load_state_dict(self, state: dict) -> None:
        """A whole-model checkpoint (from any strategy): a server takes its key range of the
        parameters and of the optimizer state, a worker the whole parameters."""
        model, optim = state["model"], state["optim"]
        names = [name for name, _ in self.model.named_parameters()]
        missing = [name for name in names if name not in model]
        if missing:
            raise ValueError(f"the checkpoint has no {', '.join(missing)}")
        whole = [to_host(model[name]) for name in names]
        if not self.is_server:
            for p, w in zip(self.params, whole):
                get_array_module(p.data).copyto(p.data, to_device(w, dtype=p.dtype))
            return
        s = self.comm.rank
        np.copyto(self.flat.data, self.ranges.gather(whole, s))
        mine = {"step_count": optim["step_count"], "lr": optim["lr"]}
        for name in self.optimizer.buffers + self.optimizer.counters:
            have = [f"{name}.{i}" in optim for i in range(len(names))]
            if any(have) and not all(have):
                raise ValueError(f"the checkpoint holds optimizer state {name!r} for some "
                                 "parameters only; a server's range needs it for all")
            if all(have) and name in self.optimizer.buffers:
                mine[f"{name}.0"] = self.ranges.gather(
                    [to_host(optim[f"{name}.{i}"]) for i in range(len(names))], s)
            elif all(have):
                mine[f"{name}.0"] = optim[f"{name}.0"]
        self.optimizer.load_state_dict(mine)

    def gather_model(self) -> None:
        """Collective over the servers: rank 0's model takes the servers' parameters (for the
        held-out evaluation; rank 0 is server 0, whose model never steps)."""
        state = self.state_dict()
        if state is not None:
            for name, p in self.model.named_parameters():
                get_array_module(p.data).copyto(p.data, to_device(state["model"][name],
                                                                  dtype=p.dtype))
