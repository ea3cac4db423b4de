"""Checkpoints of elastic averaging: the centre under the model's names, every worker beside it."""

from __future__ import annotations

import numpy as np

from ...backend import get_array_module, to_device, to_host
from ...comm.states import gather_states


class ElasticState:
    """Mixed into an EASGD strategy with ``model``, ``params``, ``optimizer``, ``comm``,
    ``centre`` (one array per parameter; rank 0's is the one saved), ``steps``, its ``mode``
    and ``first``, the rank of its first worker (1 where rank 0 is a master)."""

    def state_dict(self) -> dict | None:
        """Collective: on rank 0, ``"model"`` = the centre (so any strategy resumes from the
        consensus), ``"optim"`` = the first worker's optimizer without its fp32 masters (the
        centre is the weights), ``"rank{r}.model"`` for every rank and ``"rank{r}.optim"``
        for every worker, and ``"easgd"``: t, the world size and the mode."""
        xp, what = get_array_module(self.params[0].data), "EASGD worker states"
        models = gather_states(self.comm, self.model.state_dict(), xp, what)
        optims = gather_states(self.comm, self.optimizer.state_dict(), xp, what)
        if self.comm.rank != 0:
            return None
        names = [name for name, _ in self.model.named_parameters()]
        first = {k: v for k, v in optims[self.first].items() if not k.startswith("master.")}
        state = {"model": dict(zip(names, self.centre)), "optim": first,
                 "easgd": {"steps": self.steps, "world": self.comm.size, "mode": self.mode}}
        for r in range(self.comm.size):
            state[f"rank{r}.model"] = models[r]
            if r >= self.first:
                state[f"rank{r}.optim"] = optims[r]
        return state

    def load_state_dict(self, state: dict) -> None:
        """At the world size and mode that saved it, worker r and the centre continue exactly.
        From any other checkpoint (another world, mode or strategy) every worker starts at the
        saved model, which becomes the centre, with the first worker's optimizer state (or the
        saved one)."""
        meta = state.get("easgd", {})
        r = self.comm.rank
        same = int(meta.get("world", 0)) == self.comm.size and meta.get("mode") == self.mode
        self.model.load_state_dict(state[f"rank{r}.model"] if same else state["model"])
        worker = same and r >= self.first
        self.optimizer.load_state_dict(state[f"rank{r}.optim"] if worker else state["optim"])
        centre = state["model"]
        for c, (name, _) in zip(self.centre, self.model.named_parameters()):
            xp = get_array_module(c)  # the device's (sync), or the host's (a master's)
            xp.copyto(c, to_host(centre[name]) if xp is np else to_device(centre[name]),
                      casting="unsafe")
        self.steps = int(meta.get("steps", 0)) if same else 0
