"""EASGD with a master: rank 0 holds the centre on the host, ranks 1 … W are workers (the
asynchronous mode and the round-robin one)."""

from __future__ import annotations

from ...autograd.precision import widened
from ...backend import get_array_module, to_device, to_host
from ...comm.flat import Layout
from ..strategy import Strategy
from .state import ElasticState


class MasterAndWorkers(ElasticState, Strategy):
    """The part the master's modes share: the strategy's own dup of the mesh's world (named
    ``name``), the centre as host arrays (NumPy whatever device the workers use; rank 0's is the
    one that moves), their layout end to end (a model travels as one message), the step count,
    and the model taking the centre for evaluation. In mixed precision the centre is fp32, and
    the weights that travel and move elastically are the workers' fp32 masters. Every rank
    holds the whole model and an optimizer over it; the master steps neither and reads only its
    ``lr``."""

    lockstep = False  # a worker judges its own loss
    first = 1  # rank 0 is the master; the workers are ranks 1 … W

    def __init__(self, model, make_optimizer, objective, mesh, /, *, rho: float,
                 grad_clip: float, name: str):
        super().__init__(model, make_optimizer, objective, mesh, grad_clip=grad_clip)
        self.comm = mesh.world.dup(name=name)
        self.rho, self.workers = rho, self.comm.size - 1
        self.centre = [to_host(p.data).astype(widened(p.data.dtype))  # x̃, the master's (host),
                       for p in self.params]  # fp32 beside 16-bit workers, as their masters
        self.layout = Layout([c.shape for c in self.centre], self.centre[0].dtype)  # x end to end
        self.steps = 0  # t

    def gather_model(self) -> None:
        """Rank 0's model becomes the centre x̃ (what is evaluated)."""
        if self.comm.rank == 0:
            for p, c in zip(self.params, self.centre):
                get_array_module(p.data).copyto(p.data, to_device(c, dtype=p.dtype))  # rounded

    def close(self) -> None:
        """Collective: free the strategy's communicator."""
        self.comm.free()
