"""A layout's step on a cluster, predicted: its strategy's own description (what each rank
holds and sends, ``parallel/description.py``) fed to the cost function of its kind.

- every rank runs the whole model on its rows (DP, naive DP, local SGD, ZeRO, synchronous
  EASGD): :func:`step.data_parallel`;
- stages, and a hybrid's tensor-parallel shards of them: :func:`step.pipeline`, the schedule
  simulated with each slot's compute, 1/(p·t) of the model's on a micro-batch (a zero-bubble
  schedule's W the weights' gradients' share of the backward, ``stages.weight_share``);
- a parameter server, EASGD's master, Hogwild's shared θ: ``served.py``.

``compute(rows)`` gives (forward, backward) seconds of the whole model on ``rows`` rows: from
FLOP at the profile's rate, or timed on this machine (``compute.py``). A tensor-parallel shard
costs 1/t of it, or what ``tensor(rows)`` says, timed on the shard itself. A pipeline's P
virtual stages each take 1/P of it, or the shares ``shares(rows, P)`` gives: those of the
layers the engine's partition puts in each, timed on this machine. An axis whose ranks
lie on several nodes of ``profile.ranks_per_node`` takes the network link; the mesh puts tp
innermost, then cp, then dp, then pp (``comm/mesh.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ..train.memory import network, source_of
from ..train.strategies import REGISTRY
from ..train.strategies.family import Layout
from . import served, stages, step
from .compute import Compute, priced

Shares = Callable[[int, int], list[tuple[float, float]]]  # (rows, P) → each stage's share


def shape_of(cfg):
    """The model's :class:`~scratchpar.parallel.description.Shape`, from the config alone."""
    itemsize = 8 if cfg.train.dtype == "float64" else 4
    return network(cfg, itemsize, source_of(cfg).vocab, Layout(1), 1).shape


def predict(cfg, world: int, profile, compute: Compute, tensor: Compute | None = None,
            shares: Shares | None = None) -> step.Prediction:
    """The step of the run ``cfg`` (a layout the training command accepts) on ``world`` ranks,
    with the bytes a rank sends in it (``tensor``: a tp shard's compute, and ``shares``: each
    virtual stage's share of it, where known)."""
    t = cfg.train
    family, shape = REGISTRY[t.strategy], shape_of(cfg)
    described, ranks = family.describe(cfg, shape, world), axes(cfg, world)
    sent = sum(m.wire(ranks[m.axis]) * m.count for m in described.sends)
    if t.strategy in ("pipeline", "hybrid"):
        found = _mesh(cfg, profile, compute, tensor, shares, described, ranks)
    else:
        found = _step(cfg, world, profile, compute, described)
    return dataclasses.replace(found, sent_bytes=sent)


def from_profile(cfg, world: int, profile) -> step.Prediction:
    """The step of ``cfg`` on a machine that is not here: its compute from the profile alone
    (``compute.priced``: its kernels, or its FLOP/s), a pipeline's stages by their FLOP."""
    vocab = source_of(cfg).vocab
    return predict(cfg, world, profile, *priced(cfg, vocab, profile),
                   shares=stages.flop_shares(cfg, vocab))


def axes(cfg, world: int) -> dict[str, int]:
    """The ranks of each axis a layout's messages travel: the mesh's dp × pp × cp × tp, the
    ranks holding one stage (dp × cp), the ep ranks folded onto them, the whole world, and a
    parameter server's workers and servers."""
    t = cfg.train
    tp, cp = (t.tp, t.cp) if t.strategy == "hybrid" else (1, 1)
    pp = t.pp if t.strategy in ("pipeline", "hybrid") else 1
    servers = t.servers if t.strategy == "ps" else 0
    dp = world // (pp * cp * tp)
    ep = t.ep if t.strategy == "hybrid" else 1
    return {"dp": dp, "pp": pp, "cp": cp, "tp": tp, "dp×cp": dp * cp, "ep": ep, "world": world,
            "workers": world - servers, "servers": servers}


def micro_rows(cfg, world: int) -> int:
    """Rows of one micro-batch of a pipeline's or a hybrid's replica."""
    return -(-cfg.train.batch_size // (axes(cfg, world)["dp"] * cfg.train.m))


def _step(cfg, world: int, profile, compute: Compute, described) -> step.Prediction:
    t = cfg.train
    spans = world > profile.ranks_per_node
    workers = REGISTRY[t.strategy].workers(cfg, world) or world
    rows = compute(-(-t.batch_size // workers))
    if t.strategy == "ps":
        return served.parameter_server(described, shape_of(cfg), rows, workers, t.servers,
                                       "sync" if t.ps_mode == "sync" else "async", profile,
                                       spans)
    if t.strategy == "hogwild":
        return served.hogwild(described, rows, workers, profile)
    if t.strategy == "easgd" and t.easgd_mode != "sync":
        return served.master(described, rows, workers, profile, spans)
    return step.data_parallel(described, rows, world, profile, spans)


def _mesh(cfg, profile, compute: Compute, tensor: Compute | None, shares: Shares | None,
          described, ranks) -> step.Prediction:
    """A pipeline of ``pp`` stages, each ``tp`` shards wide, ``dp`` replicas of it: virtual
    stage k's shard computes its share of a shard's compute (1/t of the model's)."""
    t, (pp, cp, tp, ep, world) = cfg.train, (ranks[a] for a in ("pp", "cp", "tp", "ep",
                                                                  "world"))
    rows, virtual = micro_rows(cfg, world), pp * t.virtual
    if tensor is not None and tp > 1:
        forward, backward = (x / cp for x in tensor(rows))
    else:  # a cp rank computes 1/cp of the positions, its causal share balanced (zig-zag)
        forward, backward = (x / (tp * cp) for x in compute(rows))
    split = shares(rows, virtual) if shares is not None else [(1 / virtual,) * 2] * virtual
    node, inner = profile.ranks_per_node, world // pp  # the mesh's order: tp, cp, dp, then pp
    across = frozenset(axis for axis, span in (("tp", tp), ("cp", cp * tp), ("ep", ep * tp),
                                               ("dp", inner),
                                               ("dp×cp", inner), ("pp", world),
                                               ("world", world)) if span > node)
    boundary = [m for m in described.sends if m.axis == "pp" and m.count]
    link = profile.link(same_node="pp" not in across)
    # Megatron-LM's scatter/gather: each tp rank sends 1/t of the boundary, which the next
    # stage all-gathers over its node (Narayanan et al. 2021, §4.1); the engine sends it whole
    megatron = profile.kernels is not None and profile.kernels.kind != "engine"
    scattered = tp if megatron else 1
    message = link.seconds(boundary[0].nbytes / scattered) if boundary else 0.0
    schedule = (t.pp_schedule, pp, t.m, t.virtual, t.costs)  # as the command builds it
    return step.pipeline(described, schedule, [(forward * f, backward * b) for f, b in split],
                         message, ranks, profile, across,
                         stages.weight_share(cfg, source_of(cfg).vocab))
