"""One rank of the ZeRO benchmark: a world size's memory and timing parts, or the GPU search."""

from __future__ import annotations

import sys
import time
from functools import partial

import numpy as np

from ... import backend, nn, optim
from ...autograd.held import graph_bytes
from ...data import SyntheticLanguage
from ...parallel import DataParallel, ZeRO1, ZeRO2, ZeRO3
from ...parallel.zero.ledger import Ledger
from ...trace.chrome import write_chrome
from ...trace.tracer import Tracer
from ...train.defaults import ADAM_LR
from ...train.task import Task
from ..timing import Timed, turns
from ..worker import serve
from .fits import largest
from .report import CONTENDERS, stage_of

ORDER = 2  # the synthetic language's Markov order, the training CLI's default
FLOAT32 = 4  # bytes per element of every model here
STAGES = {1: ZeRO1, 2: ZeRO2, 3: ZeRO3}


class MeasuredDP(DataParallel):
    """DataParallel whose buffers a Ledger counts, as ZeRO's own ledger does: after forward,
    as each gradient is final (the fresh gradients beside the buckets kept from the last step)
    and after the step (the gradients are then views of their buckets)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.ledger, self.activations = Ledger(), 0

    def step(self, global_batch) -> dict:
        metrics = super().step(global_batch)
        self._sample()
        return metrics

    def _forward(self, global_batch):
        totals, local = super()._forward(global_batch)
        self.activations = max(self.activations, graph_bytes(local, self.params))
        self._sample()
        return totals, local

    def _ready(self, leaf) -> None:
        super()._ready(leaf)
        self._sample()

    def _sample(self) -> None:
        self.ledger.sample({"parameters": [p.data for p in self.params],
                            "gradients": [p.grad for p in self.params],
                            "buckets": [b for b in self.plan._buffers if b is not None],
                            "optimizer": [v for s in self.optimizer.state for v in s.values()
                                          if hasattr(v, "nbytes")],
                            "scratch": self.optimizer.work_arrays()})


def gpt(spec: dict):
    """A fresh GPT of ``spec`` (seed 0, float32, dropout 0), on this rank's device."""
    return nn.GPT(spec["vocab"], spec["seq"], spec["d_model"], spec["heads"], spec["layers"],
                  np.random.default_rng(0), dtype=np.float32)


def build(name: str, spec: dict, task: Task, comm, measure: bool):
    """Contender ``name`` on a fresh GPT of ``spec`` with AdamW (the CLI's defaults)."""
    model = gpt(spec)
    opt = optim.AdamW(model.parameters(), ADAM_LR, weight_decay=0.0)
    common = (model, opt, task.loss, task.count, comm)
    kw = {"bucket_bytes": spec["bucket_kib"] << 10, "grad_clip": spec["grad_clip"]}
    stage, offload = stage_of(name)
    if stage == 0:
        return (MeasuredDP if measure else DataParallel)(*common, **kw)
    return STAGES[stage](*common, **kw, offload=offload, measure=measure)


def language(spec: dict) -> tuple[Task, list]:
    """The synthetic language task of ``spec`` and its first batches, on the device."""
    task = Task(SyntheticLanguage(spec["vocab"], ORDER, spec["seq"], seed=0), None, "tok")
    return task, [task.batch(k, spec["batch"])[0] for k in range(spec["steps"])]


def held(strategy) -> dict:
    """What the strategy's ledger counted: each part's peak, the parts at the largest total,
    the autograd graph's bytes after forward, and its largest flat group or bucket."""
    ledger = strategy.ledger
    sizes = [g.n for g in strategy.groups] if hasattr(strategy, "groups") else \
        strategy.plan.sizes
    return {"peak": ledger.peak, "at_peak": ledger.at_peak, "total": ledger.total(),
            "activations": strategy.activations, "samples": ledger.samples,
            "largest_group": FLOAT32 * max(sizes)}


def memory(comm, cfg: dict) -> dict:
    """Per model, DataParallel and every ZeRO stage with and without offload train a fresh GPT
    (seed 0, AdamW) for ``steps`` steps while a Ledger counts the buffers each holds: every
    rank's peaks by part."""
    out = {}
    for label, spec in cfg["models"].items():
        task, batches = language(spec)
        ranks = {}
        for name in CONTENDERS:
            strategy = build(name, spec, task, comm, measure=True)
            for batch in batches:
                strategy.step(batch)
            ranks[name] = comm.allgather_obj(held(strategy), "ledger")
        psi = sum(int(np.prod(shape)) for shape in strategy.shapes)  # a ZeRO stage: last
        out[label] = {"psi": psi, "itemsize": FLOAT32, "moments": 2, "ranks": ranks}
    return out


class Breakdown:
    """One contender's steps as this rank sees them: its own seconds, the tracer's forward and
    backward regions, the seconds copying to and from the host, and its update (the optimizer
    step of the shards, or DP's "optimizer" region; a copy made inside it counts as a copy)."""

    def __init__(self, strategy, tracer: Tracer):
        self.strategy, self.tracer, self.steps = strategy, tracer, []
        self.update = getattr(strategy, "update", None)  # ZeRO's update of the shards
        self.update_s = 0.0
        if self.update is not None:
            self.update.step = self._timed(self.update.step)

    def _timed(self, step):
        """``step`` that adds its seconds, less those of any copy it makes, to update_s."""

        def timed(*args):
            start, copied = time.perf_counter(), self.copy_s()
            metrics = step(*args)
            self.update_s += time.perf_counter() - start - (self.copy_s() - copied)
            return metrics

        return timed

    def copy_s(self) -> float:
        """Seconds copied to and from the host so far (none without offload)."""
        return getattr(self.update, "copy_s", 0.0)

    def __call__(self, batch) -> None:
        self.tracer.events.clear()
        start, copied, self.update_s = time.perf_counter(), self.copy_s(), 0.0
        self.strategy.step(batch)
        backend.sync()
        total = time.perf_counter() - start
        regions = {}
        for e in self.tracer.events:
            if e.cat == "compute":
                regions[e.name] = regions.get(e.name, 0.0) + (e.end - e.start) / 1e9
        update = regions.get("optimizer", 0.0) if self.update is None else self.update_s
        self.steps.append({"total_s": total, "forward_s": regions.get("forward", 0.0),
                           "backward_s": regions.get("backward", 0.0),
                           "copy_s": self.copy_s() - copied, "update_s": update})


def timing(comm, cfg: dict) -> dict:
    """Every contender's steps in turns (median of the slowest rank), rank 0's split of each
    step (medians over the timed steps), and with ``"trace"`` a traced ZeRO-3 step."""
    spec = cfg["model"]
    task, batches = language({**spec, "steps": 1})
    comm.tracer = tracer = Tracer(comm.rank)
    split = {name: Breakdown(build(name, spec, task, comm, measure=False), tracer)
             for name in CONTENDERS}
    timed = turns(comm, {name: Timed(lambda b=b: b(batches[0]), backend.sync)
                         for name, b in split.items()}, cfg["repeats"], cfg["warmup"])
    comm.tracer = None
    parts = {name: {key: float(np.median([s[key] for s in b.steps[-cfg["repeats"]:]]))
                    for key in b.steps[0]} for name, b in split.items()}
    result = {"world_size": comm.size, "timed": timed, "split": parts}
    if cfg.get("trace"):
        result["trace"] = traced(comm, spec, task, batches[0], cfg["trace"])
    return result


def traced(comm, spec: dict, task: Task, batch, path: str) -> str:
    """One ZeRO-3 step after an untraced one, every rank's regions on a clock zeroed at a
    barrier, merged by rank 0 into the Chrome trace ``path``."""
    zero3 = build("zero3", spec, task, comm, measure=False)
    zero3.step(batch)
    comm.tracer = tracer = Tracer(comm.rank)
    tracer.align(comm.barrier)
    zero3.step(batch)
    comm.tracer = None
    ranks = comm.allgather_obj(tracer.export(), "trace")
    if comm.rank == 0:
        write_chrome(path, ranks)
    return path


def fits(comm, cfg: dict) -> dict:
    """Per contender, the widest GPT (fits.py) whose step fits the budget on every rank."""

    def attempt(name: str, trial, spec: dict) -> None:
        task, batches = language({**spec, "steps": 1})
        build(name, spec, task, trial, measure=False).step(batches[0])
        backend.sync()

    return {"world_size": comm.size, "largest": {
        name: largest(comm, cfg, partial(attempt, name)) for name in cfg["contenders"]}}


def world(comm, cfg: dict) -> dict:
    """A world size's job: the memory part, then the timing part."""
    return {"memory": memory(comm, cfg["memory"]), "timing": timing(comm, cfg["timing"])}


PARTS = {"world": world, "fits": fits}

if __name__ == "__main__":
    sys.exit(serve(lambda comm, cfg: PARTS[cfg["part"]](comm, cfg)))
