"""Checkpoints of a parameter server: the servers' key ranges joined into the single-device
model's names, and a whole-model checkpoint cut back into ranges, for any number of servers."""

from __future__ import annotations

import numpy as np

from ...backend import get_array_module, to_device, to_host
from ...comm.states import gather_states
from .pieces import held_for_all, load_server_pieces, server_pieces


class ServerState:
    """Mixed into a parameter server that has ``model``, ``params``, ``ranges`` (KeyRanges),
    ``comm`` (its dup of the world), ``group`` (the servers' or the workers' communicator),
    ``is_server`` and, on a server, ``flat`` (its range, a host Parameter) and ``optimizer``."""

    def state_dict(self) -> dict | None:
        """Called on every rank, a collective over the servers (a worker sends nothing): the
        whole model and optimizer state on rank 0 (server 0), keyed as one device keys them,
        so any strategy resumes from it, plus the strategy's :meth:`extras`; ``None``
        elsewhere."""
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
                "optim": optim, **self.extras()}

    def extras(self) -> dict:
        """Parts beside the model and optimizer (none for the synchronous spec)."""
        return {}

    def load_extras(self, scalars) -> None:
        """Take back what :meth:`extras` gave, from ``scalars(part)``, a part's scalars
        (nothing for the synchronous spec)."""

    def pieces(self) -> tuple[list, dict]:
        """Each server's key range (:func:`~.pieces.server_pieces`); a worker writes none."""
        return server_pieces(self)

    def load_pieces(self, stored) -> None:
        """A server's key range, a worker's whole parameters, read from a checkpoint."""
        load_server_pieces(self, stored)
        self.load_extras(stored.scalars)

    def _join(self, ranges: list) -> list:
        """Per-parameter host arrays from every server's flat range, in server order."""
        arrays = [np.empty(p.shape, ranges[0].dtype) for p in self.params]  # the servers
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
            if not held_for_all(name, [f"{name}.{i}" in optim for i in range(len(names))]):
                continue
            if name in self.optimizer.buffers:
                mine[f"{name}.0"] = self.ranges.gather(
                    [to_host(optim[f"{name}.{i}"]) for i in range(len(names))], s)
            else:
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
