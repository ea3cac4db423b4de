"""A model's sparse layers cut to this rank's experts, each joined to its group."""

from __future__ import annotations

from ...nn.module import ModuleList
from ...nn.moe import MixtureOfExperts
from .group import ExpertError, ExpertGroup


class HeldExperts(ModuleList):
    """The experts this rank holds of a sparse layer, named by their place among all E
    (``experts.{i}``), as the whole model names them, so checkpoints and optimizer states key
    them alike under any ep."""

    def __init__(self, experts: dict):
        for i, module in experts.items():
            setattr(self, str(i), module)


def expert_parallel(model, group) -> None:
    """Each sparse layer of ``model`` routes over ``group``
    (:class:`~.group.ExpertGroup`) and keeps only its ep rank's experts, in place."""
    ep, rank = (1, 0) if group.ep is None else (group.ep.size, group.ep.rank)
    for layer in [m for _, m in model.named_modules() if isinstance(m, MixtureOfExperts)]:
        count = layer.spec.count
        if count % ep:
            raise ExpertError(f"ep = {ep} ranks each hold an equal share of a layer's experts: "
                              f"{count} experts do not divide by {ep}")
        share = count // ep
        layer.experts = HeldExperts({i: layer.experts[i]
                                     for i in range(rank * share, (rank + 1) * share)})
        layer.group = group


def expert_parameters(model) -> set[int]:
    """The ids of ``model``'s expert parameters: those of its sparse layers' experts, whose
    gradients sum over the ranks holding the same experts, not over every replica."""
    return {id(p) for _, m in model.named_modules() if isinstance(m, MixtureOfExperts)
            for p in m.experts.parameters()}


def experts_over(model, mesh, context=None, capacity: str = "global"):
    """Join ``model``'s sparse layers to an :class:`~.group.ExpertGroup` over ``mesh``'s
    replicas and ep axis (communicators of its own) and cut them to this rank's experts; the
    group, or ``None`` where ``model`` is dense or routes alone (one replica, ep = 1)."""
    sparse = any(isinstance(m, MixtureOfExperts) for _, m in model.named_modules())
    if not sparse:
        if mesh.ep > 1:
            raise ExpertError(f"ep = {mesh.ep} splits a sparse model's experts; this "
                              f"{type(model).__name__} has none (give it experts)")
        return None
    if mesh.replica_comm.size == 1:
        return None
    group = ExpertGroup(mesh.replica_comm.dup(name="expert tally"),
                        mesh.ep_comm.dup(name="expert dispatch") if mesh.ep > 1 else None,
                        context, capacity)
    expert_parallel(model, group)
    return group
