"""One rank of the ZeRO benchmark: a world size's memory and timing parts, or the GPU search."""

from __future__ import annotations

import gc
import shutil
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np

from ... import backend, nn, optim
from ...autograd.precision import dtype_of
from ...comm.errors import WaitTimeout
from ...comm.mesh import Mesh
from ...data import SyntheticLanguage
from ...optim.mixed import MixedPrecision
from ...parallel import DataParallel
from ...parallel.ledger import Ledger
from ...parallel.pieces import split_state
from ...parallel.zero import STAGES
from ...trace.chrome import write_chrome
from ...trace.tracer import Tracer
from ...train.checkpoint import save_checkpoint
from ...train.defaults import ADAM_LR
from ...train.memory_models import GiB, gpt_parameters
from ...train.sharded import save_sharded
from ...train.stored import load_checkpoint, open_checkpoint
from ...train.task import Task
from ..timing import Timed, turns

ORDER = 2  # the synthetic language's Markov order, the training CLI's default
FLOAT32 = 4  # bytes per element of every model here
FIT_TIMEOUT_S = 60.0  # how long a rank waits for one that ran out of memory mid-collective
CONTENDERS = ("dp", "zero1", "zero2", "zero3", "zero1-offload", "zero2-offload", "zero3-offload")


def stage_of(name: str) -> tuple[int, bool]:
    """A contender's ZeRO stage (DP: 0) and whether it offloads: "zero2-offload" → (2, True)."""
    return (0 if name == "dp" else int(name[4]), name.endswith("-offload"))


def gpt(spec: dict, precision: str = "fp32") -> nn.GPT:
    """A fresh GPT of ``spec`` (seed 0, float32, ``spec``'s dropout if any), in 16 bits under a
    16-bit ``precision``."""
    model = nn.GPT(spec["vocab"], spec["seq"], spec["d_model"], spec["heads"], spec["layers"],
                   np.random.default_rng(0), dropout=spec.get("dropout", 0.0))
    if precision != "fp32":
        model.to_dtype(dtype_of(precision, backend.xp_default()))
    return model


def build(name: str, spec: dict, task: Task, mesh):
    """Contender ``name`` over ``mesh`` (``Mesh(comm)``, which the caller frees) on :func:`gpt`
    of ``spec`` with AdamW (the CLI's defaults), ``task`` its objective; under ``spec``'s 16-bit
    ``precision``, AdamW on fp32 masters (unscaled: the bytes are the same)."""
    precision = spec.get("precision", "fp32")

    def make_optimizer(params):  # over what the contender steps: the model, or a ZeRO rank's
        adamw = optim.AdamW(params, ADAM_LR, weight_decay=0.0)
        return adamw if precision == "fp32" else MixedPrecision(adamw)

    common = (gpt(spec, precision), make_optimizer, task, mesh)
    kw = {"bucket_bytes": spec["bucket_kib"] << 10, "grad_clip": spec["grad_clip"]}
    stage, offload = stage_of(name)
    if stage == 0:
        return DataParallel(*common, **kw)
    return STAGES[stage](*common, **kw, offload=offload)


def language(spec: dict) -> tuple[Task, list]:
    """The synthetic language task of ``spec`` and its first batches, on the device."""
    task = Task(SyntheticLanguage(spec["vocab"], ORDER, spec["seq"], seed=0), None, "tok")
    return task, [task.batch(k, spec["batch"])[0] for k in range(spec["steps"])]


def memory(comm, cfg: dict) -> dict:
    """Per model, each of ``cfg["contenders"]`` trains a fresh GPT for ``steps`` steps while a
    Ledger counts what it holds: this rank's peaks by part and the graph's bytes after forward;
    and the model's Ψ."""
    out, mesh = {}, Mesh(comm)  # pure data parallelism
    for label, spec in cfg["models"].items():
        task, batches = language(spec)
        held = {}
        for name in cfg["contenders"]:
            strategy = build(name, spec, task, mesh)
            ledger = strategy.attach(Ledger())
            for batch in batches:
                strategy.step(batch)
            held[name] = {"peak": ledger.peak, "activations": ledger.activations}
            strategy.close()
        psi = gpt_parameters(spec["vocab"], spec["seq"], spec["d_model"], spec["layers"])
        out[label] = {"psi": psi, "held": held}
    mesh.free()
    return out


class Breakdown:
    """One contender's steps as this rank sees them: its seconds, the tracer's forward and
    backward regions, its copies to and from the host, and its update (the shards' optimizer
    step less the copies made inside it, or DP's "optimizer" region)."""

    def __init__(self, strategy, tracer: Tracer):
        self.strategy, self.tracer, self.steps, self.update_s = strategy, tracer, [], 0.0
        self.update = getattr(strategy, "update", None)  # ZeRO's update of the shards
        if self.update is not None:
            inner = self.update.step

            def timed(*args):
                start, copied = time.perf_counter(), self.copy_s()
                metrics = inner(*args)
                self.update_s += time.perf_counter() - start - (self.copy_s() - copied)
                return metrics

            self.update.step = timed

    def copy_s(self) -> float:
        """Seconds copied to and from the host so far (none without offload)."""
        return getattr(self.update, "copy_s", 0.0)

    def __call__(self, batch) -> None:
        self.tracer.events.clear()
        start, copied, self.update_s = time.perf_counter(), self.copy_s(), 0.0
        self.strategy.step(batch)
        backend.sync()
        total = time.perf_counter() - start

        def region(name: str) -> float:
            return sum(e.end - e.start for e in self.tracer.events
                       if e.cat == "compute" and e.name == name) / 1e9

        self.steps.append({"total_s": total, "forward_s": region("forward"),
                           "copy_s": self.copy_s() - copied,
                           "update_s": self.update_s if self.update else region("optimizer")})


def timing(comm, cfg: dict) -> dict:
    """Every contender's steps in turns (median of the slowest rank), rank 0's split of each
    step (medians), and with ``"trace"`` one more ZeRO-3 step, every rank's regions on a clock
    zeroed at a barrier, merged by rank 0 into that Chrome trace."""
    spec = cfg["models"]["cli"]
    task, (batch,) = language({**spec, "steps": 1})
    mesh = Mesh(comm)  # pure data parallelism
    comm.tracer = tracer = Tracer(comm.rank)
    split = {name: Breakdown(build(name, spec, task, mesh), tracer)
             for name in CONTENDERS}
    timed = turns(comm, {name: Timed(lambda b=b: b(batch)) for name, b in split.items()}, cfg)
    parts = {name: {key: float(np.median([s[key] for s in b.steps[-cfg["repeats"]:]]))
                    for key in b.steps[0]} for name, b in split.items()}
    if cfg["trace"]:
        comm.tracer = tracer = Tracer(comm.rank)
        tracer.align(comm.barrier)
        split["zero3"].strategy.step(batch)
        ranks = comm.allgather_obj(tracer.export(), "trace")
        if comm.rank == 0:
            write_chrome(cfg["trace"], ranks)
    comm.tracer = None
    for b in split.values():
        b.strategy.close()
    mesh.free()
    return {"timed": timed, "split": parts}


def checkpoints(comm, cfg: dict) -> dict:
    """ZeRO-3 on the large GPT saved and resumed, in turns, two ways: each rank its own pieces
    (``train/sharded.py``), or through rank 0 (``state_dict()`` gathered there and written as
    one file, read whole by every rank: the format before pieces). The slowest rank's medians,
    and the megabytes the busiest rank writes."""
    spec, mesh = cfg["models"]["large"], Mesh(comm)
    task, (batch,) = language({**spec, "steps": 1})
    saved, fresh = build("zero3", spec, task, mesh), build("zero3", spec, task, mesh)
    saved.step(batch)
    root = comm.allgather_obj(tempfile.mkdtemp() if comm.rank == 0 else None, "folder")[0]
    pieces, single = f"{root}/pieces", f"{root}/single"

    def through_rank_0():
        state = saved.state_dict()
        if comm.rank == 0:
            arrays, scalars = split_state(state)
            save_checkpoint(single, arrays, {"step": 1, **scalars})

    def read_whole():
        arrays, meta = load_checkpoint(single)
        fresh.load_state_dict({part: {**arrays[part], **meta.get(part, {})} for part in arrays})

    def read_pieces():
        with open_checkpoint(pieces) as stored:
            fresh.load_pieces(stored)

    def wrote(directory: str, name: str) -> int:
        path = Path(directory) / name
        return path.stat().st_size if path.exists() else 0

    contenders = {"pieces save": lambda: save_sharded(pieces, *saved.pieces(), {"step": 1},
                                                      comm),
                  "rank 0 save": through_rank_0, "pieces load": read_pieces,
                  "rank 0 load": read_whole}
    contenders["pieces save"](), contenders["rank 0 save"]()  # what the loads read
    timed = turns(comm, {k: Timed(run) for k, run in contenders.items()}, cfg)
    written = comm.allgather_obj([wrote(pieces, f"rank{comm.rank}.pieces.npz"),
                                  wrote(single, "model.npz") + wrote(single, "optim.npz")])
    for strategy in (saved, fresh):
        strategy.close()
    mesh.free()
    comm.barrier()
    if comm.rank == 0:
        shutil.rmtree(root)
    return {"timed": timed, "written": [max(w[i] for w in written) for i in range(2)]}


def world(comm, cfg: dict) -> dict:
    """A world size's job: the memory part of every contender, then the timing part, then the
    checkpoints'."""
    return {"memory": memory(comm, {**cfg, "contenders": CONTENDERS}), "timing": timing(comm, cfg),
            "checkpoints": checkpoints(comm, cfg)}


def largest(comm, cfg: dict, attempt) -> dict:
    """Double ``d_model`` from ``cfg["start"]`` while a step fits ``cfg["budget_gib"]`` per rank
    (CuPy's pool limit), up to ``cfg["max_d_model"]``; then bisect in multiples of
    ``head_dim``. ``attempt(comm, spec)`` builds the contender and takes one step, on a
    duplicate communicator whose waits give up after FIT_TIMEOUT_S, so that the ranks waiting
    on one that ran out of memory give up too; then every rank frees its pool and they agree."""
    import cupy

    def fits(d_model: int) -> bool:
        trial = comm.dup("fit")
        trial.timeout = FIT_TIMEOUT_S
        try:
            attempt(trial, at_width(cfg, d_model))
            ok = True
        except (cupy.cuda.memory.OutOfMemoryError, WaitTimeout):
            ok = False
        gc.collect()
        cupy.get_default_memory_pool().free_all_blocks()
        verdict = all(comm.allgather_obj(ok, "fits"))
        trial.free()
        tried.append([d_model, verdict])
        return verdict

    pool = cupy.get_default_memory_pool()
    pool.set_limit(size=int(cfg["budget_gib"] * GiB))
    q, lo, hi, tried = cfg["head_dim"], 0, cfg["start"], []
    while hi <= cfg["max_d_model"] and fits(hi):
        lo, hi = hi, 2 * hi
    capped = hi > cfg["max_d_model"]
    while not capped and hi - lo > q:
        mid = (lo + hi) // 2 // q * q
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    pool.set_limit(size=0)  # no limit
    m = cfg["model"]
    return {"d_model": lo or None,
            "params": gpt_parameters(m["vocab"], m["seq"], lo, m["layers"]) if lo else None,
            "capped": capped, "tried": tried}


def at_width(cfg: dict, d_model: int) -> dict:
    """The GPT of ``cfg`` at width ``d_model``, one head per ``head_dim`` channels."""
    return {**cfg["model"], "d_model": d_model, "heads": d_model // cfg["head_dim"]}


def attempt(name: str, trial, spec: dict) -> None:
    """Contender ``name`` on the GPT of ``spec`` over ``trial``'s ranks, and one step of it."""
    task, (batch,) = language({**spec, "steps": 1})
    mesh = Mesh(trial)  # pure data parallelism, on the trial's communicator
    try:
        strategy = build(name, spec, task, mesh)
        strategy.step(batch)
        backend.sync()
        strategy.close()
    finally:
        mesh.free()


def fits(comm, cfg: dict) -> dict:
    """Per contender, the widest GPT (:func:`largest`) whose step fits the budget on every rank."""
    return {name: largest(comm, cfg, partial(attempt, name)) for name in cfg["contenders"]}
