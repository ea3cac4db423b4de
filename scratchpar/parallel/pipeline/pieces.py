"""A pipeline's checkpoint pieces: each stage writes and reads its own parameters and their
optimizer state, under tensor parallelism each rank its shards (a box of the view its split
names), so no rank gathers the model. A parameter that several stages hold (a tied embedding)
is written by the lowest, as it counts in the norm once; the replicas over dp (and cp) share
the writing out, and a sparse layer's experts the ranks holding the same ones."""

from __future__ import annotations

from ...backend import to_device
from ..pieces import Piece, shared_out


def stage_pieces(pipe) -> tuple[list[Piece], dict]:
    """This rank's share of its stage's parameters and optimizer buffers as pieces (keyed as
    one device keys them), the optimizer's step, rate and counters as scalars."""
    stage, tp = pipe.stage, pipe.mesh.tp_comm
    writes = [holders[0] == stage.rank and (tp.rank == 0 or pipe.split(i))
              for i, holders in enumerate(stage.holders)]
    experts = pipe.expert_ids
    pieces = {False: [], True: []}  # a dense parameter's pieces, an expert's
    for i, (name, p) in enumerate(stage.named_parameters()):
        if writes[i]:
            pieces[id(p) in experts].append(Piece("model", name, pipe.box(i), p.data))
    optim = {}
    for key, value in pipe.optimizer.entries().items():
        name, _, j = key.rpartition(".")
        if not name:  # the step and the rate
            optim[key] = value
        elif hasattr(value, "shape"):
            if writes[int(j)]:
                pieces[id(stage.params[int(j)]) in experts].append(Piece(
                    "optim", f"{name}.{stage.index[int(j)]}", pipe.box(int(j)), value))
        else:
            optim[f"{name}.{stage.index[int(j)]}"] = value
    mine = []  # the ranks holding the same parameters share them out
    for comm, expert in ((pipe.mesh.replica_comm, False), (pipe.mesh.edp_comm, True)):
        if pieces[expert]:
            mine += shared_out(pieces[expert], comm.rank, comm.size)
    return mine, {"model": {}, "optim": optim}


def load_stage_pieces(pipe, stored) -> None:
    """This rank's parameters and optimizer state from a checkpoint's blocks (any strategy,
    mesh or world size wrote it): every block read and checked before anything changes."""
    stage, saved = pipe.stage, set(stored.names("model"))
    missing = [name for name in stage.names if name not in saved]
    if missing:
        raise ValueError(f"the checkpoint has no {', '.join(missing)}")
    unexpected = sorted(saved - set(pipe.shapes))
    if unexpected:
        raise ValueError(f"the checkpoint has {', '.join(unexpected)}, which the model has not")
    weights = [stored.read("model", name, pipe.box(i)).reshape(p.shape)
               for i, (name, p) in enumerate(stage.named_parameters())]
    local = {g: j for j, g in enumerate(stage.index)}
    sd = {}
    for key in stored.names("optim"):
        name, _, g = key.rpartition(".")
        if g.isdigit() and int(g) in local:
            j = local[int(g)]
            value = stored.read("optim", key, pipe.box(j))
            sd[f"{name}.{j}"] = to_device(value.reshape(stage.params[j].shape))
    for key, value in stored.scalars("optim").items():
        name, _, g = key.rpartition(".")
        if not name:
            sd[key] = value
        elif g.isdigit() and int(g) in local:
            sd[f"{name}.{local[int(g)]}"] = value
    for p, w in zip(stage.params, weights):
        pipe.xp.copyto(p.data, to_device(w).astype(p.dtype))
    pipe.optimizer.load_state_dict(sd)
