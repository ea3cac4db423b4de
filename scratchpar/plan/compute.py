"""A step's compute in seconds: from FLOP at a device's rate, for a machine that is not here,
or measured on this one, for the model at hand.

- :func:`roofline`: rows · W / F forward and backward (plan/flops.py's W), the compute-bound
  side of the roofline (Williams, Waterman & Patterson 2009): right where large products
  dominate, short where elementwise ops and the framework's cost per op weigh;
- :func:`measured`: the model's own forward and backward on ``rows`` rows of its data, timed
  on this device (medians after a warm-up), everything included;
- :func:`measured_shard`: the same of a tensor-parallel shard, timed on the shard itself, less
  the time inside its collectives: half a matrix does not cost half the time where the cost
  per op weighs, and replicated ops (norms, residuals) are not split at all.
"""

from __future__ import annotations

from collections.abc import Callable

from ..parallel.tensor import tensor_parallel
from ..timing import clock, medians
from ..trace.tracer import Tracer
from . import flops
from .flops import Work
from .kernels import gpt_seconds

Compute = Callable[[int], tuple[float, float]]


def roofline(work: Work, rows: int, profile, precision: str = "fp32") -> tuple[float, float]:
    """(forward, backward) seconds of ``rows`` rows at the profile's FLOP/s in ``precision``,
    times its kernels' share of it where it declares one."""
    rate = profile.device.rate(precision) * (profile.kernels.efficiency if profile.kernels
                                             else 1.0)
    return rows * work.forward / rate, rows * work.backward / rate


def priced(cfg, vocab: int, profile) -> tuple[Compute, Compute | None]:
    """``compute(rows)`` of the whole model and ``tensor(rows)`` of a hybrid's tp shard,
    on a machine that is not here: a GPT on a profile with [kernels] by its kernels
    (``kernels.py``), else by its FLOP (the roofline; a shard 1/tp of it)."""
    work = flops.of(cfg, vocab)
    if profile.kernels is None or cfg.model.kind != "gpt":
        return (lambda rows: roofline(work, rows, profile, cfg.train.precision)), None
    t = cfg.train
    tp, sp = (t.tp, t.sequence_parallel) if t.strategy == "hybrid" else (1, False)
    return ((lambda rows: gpt_seconds(cfg, vocab, rows, profile)),
            lambda rows: gpt_seconds(cfg, vocab, rows, profile, tp, sp))


def measured(task, rows: int, repeats: int = 5, warmup: int = 1) -> tuple[float, float]:
    """(forward, backward) seconds of ``task``'s model on ``rows`` rows of its own data: the
    summed loss, as a data-parallel rank computes it, then its backward; medians of
    ``repeats`` after ``warmup`` (a fresh process maps its memory in the first few)."""
    batch, _ = task.batch(0, rows)
    return _timed(task.model, lambda: task.loss(task.model, batch, reduction="sum"), None,
                  repeats, warmup)


def measured_shard(task, rows: int, comm, sequence_parallel: bool, repeats: int = 5,
                   warmup: int = 1) -> tuple[float, float]:
    """(forward, backward) seconds of this rank's shard of ``task``'s model over the tp group
    ``comm`` (every rank of it calls this) on ``rows`` rows, as :func:`measured`, less the
    seconds this rank spent inside the shard's collectives (traced), which the model of cost
    prices apart."""
    shard = tensor_parallel(task.model, comm, sequence_parallel)
    inputs, targets = task.split(task.batch(0, rows)[0])
    loss = getattr(shard, "output_loss", task.output_loss)  # a GPT's vocabulary-parallel loss
    return _timed(shard, lambda: loss(shard(inputs), targets, reduction="sum"), comm, repeats,
                  warmup)


def _timed(model, forward, comm, repeats: int, warmup: int) -> tuple[float, float]:
    """Medians of ``repeats`` after ``warmup`` of ``forward()`` and its loss's backward, each
    less the time in ``comm``'s collectives (None: none)."""
    tracer = comm.tracer if comm is not None else None

    def run() -> tuple[float, float]:
        model.zero_grad()
        if comm is not None:
            comm.tracer = Tracer(comm.rank)
        start = clock()
        loss = forward()
        middle = clock()
        loss.backward()
        end = clock()
        inside = _inside(comm, round(middle * 1e9))
        return middle - start - inside[0] / 1e9, end - middle - inside[1] / 1e9

    forward_s, backward_s = medians(run, repeats, warmup)
    if comm is not None:
        comm.tracer = tracer  # as it was found
    return forward_s, backward_s


def _inside(comm, middle: int) -> tuple[int, int]:
    """Nanoseconds of this pass's collectives on ``comm`` (traced) before ``middle`` (the
    forward's), and after (the backward's)."""
    if comm is None:
        return 0, 0
    origin, spans = comm.tracer.origin_ns, [0, 0]
    for event in comm.tracer.events:
        if event.cat == "comm":
            spans[origin + event.start >= middle] += event.end - event.start
    return spans[0], spans[1]
