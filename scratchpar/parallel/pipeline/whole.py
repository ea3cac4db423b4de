"""A pipeline's checkpoint as one device's whole state: each stage's tensors (its tp shards
joined back) gathered on rank 0, and cut back out of such a state for any layout, so that any
strategy and mesh resumes it."""

from __future__ import annotations

from ...comm.states import gather_states


def whole_state(pipe) -> dict | None:
    """Collective over ``pipe``'s replica: the whole model and optimizer state on rank 0, every
    tensor-parallel shard joined back (keyed as one device keys them); ``None`` elsewhere.
    Under ep > 1 the first replica's ep group joins its experts first."""
    flat, mesh = flat_state(pipe), pipe.mesh
    if mesh.ep > 1 and mesh.edp_comm.rank == 0:
        parts = gather_states(mesh.ep_comm, flat, pipe.xp, "expert states")
        flat = None if parts is None else {k: v for part in parts for k, v in part.items()}
    if mesh.replica_comm.rank != 0:
        return None
    flat = pipe._whole(flat)
    if flat is None:
        return None
    parts = gather_states(pipe.mesh.pp_comm, flat, pipe.xp, "pipeline stage states")
    if parts is None:
        return None
    state = {"model": {}, "optim": {}}
    for part in parts:
        for key, value in part.items():
            section, _, name = key.partition("/")
            state[section].setdefault(name, value)
    return state


def flat_state(pipe) -> dict:
    """This rank's stage: ``model/NAME`` and ``optim/KEY.i`` (i the whole model's index)."""
    flat = {f"model/{k}": v for k, v in pipe.stage.state_dict().items()}
    for key, value in pipe.optimizer.state_dict().items():
        name, _, i = key.rpartition(".")
        flat[f"optim/{key}" if not name else f"optim/{name}.{pipe.stage.index[int(i)]}"] = value
    return flat


def load_whole_state(pipe, state: dict) -> None:
    """This rank's part of a whole-model checkpoint (from any strategy and mesh): its stage's
    tensors (cut to its tensor-parallel shard, under :class:`~..hybrid.Hybrid`)."""
    model, optim, stage = state["model"], state["optim"], pipe.stage
    missing = [name for name in stage.names if name not in model]
    if missing:
        raise ValueError(f"the checkpoint has no {', '.join(missing)}")
    unexpected = sorted(set(model) - set(pipe.shapes))
    if unexpected:
        raise ValueError(f"the checkpoint has {', '.join(unexpected)}, which the model has not")
    local = {g: i for i, g in enumerate(stage.index)}
    flat = {f"model/{name}": model[name] for name in stage.names}
    for key, value in optim.items():
        name, _, i = key.rpartition(".")
        if not name or int(i) in local:
            flat[f"optim/{key}"] = value
    mine = pipe._mine(flat)
    for name, p in zip(stage.names, pipe.params):
        pipe.xp.copyto(p.data, mine[f"model/{name}"].astype(p.dtype))
    optim_state = {}
    for key, value in mine.items():
        section, _, rest = key.partition("/")
        name, _, i = rest.rpartition(".")
        if section == "optim":
            optim_state[rest if not name else f"{name}.{local[int(i)]}"] = value
    pipe.optimizer.load_state_dict(optim_state)
