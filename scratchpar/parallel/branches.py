"""Model parallelism over branches: a Towers model's independent towers spread over the ranks."""

from __future__ import annotations

from ..autograd import functional as F
from ..backend import get_array_module
from ..comm.chunks import bounds
from ..comm.states import gather_states
from ..nn.module import Module, ModuleList
from . import duals


class ParallelBranches(Module):
    """X[B,F] → towers i ∈ bounds(k, p)[r] on rank r → Y_r[B,k_r,H] → gather → Y[B,k,H] on
    every rank → (B, k·H) → head, replicated → (B, n_classes).

    Classic model parallelism over branches (Krizhevsky et al. 2012, §3.2: each GPU runs its own
    columns, and they communicate only where the columns join). The towers share nothing, so
    the only messages are one all-gather of their outputs forward and one all-reduce of the
    input's gradient backward. Any k works: the first k mod p ranks hold one tower more, and a
    rank holds none when k < p (it still takes part in both collectives).

    Built from a single-device :class:`~scratchpar.nn.Towers`: rank r keeps that model's own
    tower modules ``towers.<i>`` (names, and so checkpoints, stay the whole model's) and its
    head. Once the caller drops ``model``, the other towers are freed. The head's parameters
    are replicated and get the same gradient on every rank, since every rank computes the loss
    alike from the same joined outputs.
    """

    def __init__(self, model, comm):
        start, stop = bounds(model.k, comm.size)[comm.rank]
        self.comm, self.k, self.width = comm, model.k, model.width
        self.towers = ModuleList(())
        for i in range(start, stop):
            setattr(self.towers, str(i), model.towers[i])  # the global index: the model's name
        self.head = model.head

    def forward(self, x):
        # Megatron's f (Shoeybi et al. 2019, §3): every rank's towers read all of x, so its
        # backward sums ∂L/∂x over the ranks, and each rank gets the whole input gradient
        x = duals.identity(x, self.comm)  # (B, F)
        lead = tuple(x.shape[:-1])
        mine = [t(x) for t in self.towers]  # k_r × (B, H)
        if mine:
            local = F.stack(mine, axis=-2)  # (B, k_r, H)
        else:  # no tower here: an empty share that still leads back to f, whose all-reduce
            # every rank must join in backward
            local = F.reshape(F.getitem(x, (..., slice(0, 0))), (*lead, 0, self.width))
        # gather, not all_gather: the head and the loss after it run alike on every rank and
        # count once, so each rank's ∂L/∂Y is already the whole gradient and rank r keeps its
        # towers' slice. An all_gather's reduce-scatter would sum p equal copies (p × too large).
        # Along the tower axis, so the join below is a view and the graph keeps one copy
        joined = duals.gather(local, self.comm, axis=-2)  # (B, k, H), towers in global order
        return self.head(F.reshape(joined, (*lead, self.k * self.width)))  # (B, n_classes)

    def whole_state_dict(self) -> dict | None:
        """Collective: the single-device model's state dict (its names, its order) on rank 0;
        ``None`` on the other ranks. Each rank sends its towers; rank 0 adds its head."""
        state = self.state_dict()
        towers = {name: a for name, a in state.items() if name.startswith("towers.")}
        xp = get_array_module(self.head.weight.data)
        parts = gather_states(self.comm, towers, xp, "branch states")
        if parts is None:
            return None
        whole = {name: a for part in parts for name, a in part.items()}  # ranks hold towers
        whole.update((name, a) for name, a in state.items() if name not in towers)  # in order
        return whole

    def load_state_dict(self, state: dict) -> None:
        """Take this rank's towers and the head from a whole model's state dict."""
        mine = {name for name, _ in self.named_parameters()}
        super().load_state_dict({name: a for name, a in state.items() if name in mine})
