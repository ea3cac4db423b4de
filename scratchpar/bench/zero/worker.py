"""One rank of the ZeRO benchmark: a world size's bytes held, step times and checkpoints."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from ... import backend, nn, optim, timing
from ...autograd.precision import dtype_of
from ...comm.mesh import Mesh
from ...data import SyntheticLanguage
from ...device_rng import DeviceRandom
from ...nn.recompute import chosen, recompute
from ...optim.mixed import MixedPrecision
from ...parallel import DataParallel, SingleDevice
from ...parallel.ledger import Ledger
from ...parallel.pieces import split_state
from ...parallel.zero import STAGES
from ...trace.chrome import write_chrome
from ...trace.tracer import Tracer
from ...train.checkpoint import save_checkpoint
from ...train.defaults import ADAM_LR
from ...train.memory_parameters import gpt_parameters
from ...train.sharded import save_sharded
from ...train.stored import open_checkpoint
from ...train.task import Task
from ..timing import Timed, turns

ORDER = 2  # the synthetic language's Markov order, the training CLI's default
FLOAT32 = 4  # bytes per element of every model here
CONTENDERS = ("dp", "zero1", "zero2", "zero3", "zero1-offload", "zero2-offload", "zero3-offload")


def stage_of(name: str) -> tuple[int, bool]:
    """A contender's ZeRO stage (DP: 0) and whether it offloads: "zero2-offload" → (2, True)."""
    return (0 if name == "dp" else int(name[4]), name.endswith("-offload"))


def gpt(spec: dict, precision: str = "fp32") -> nn.GPT:
    """A fresh GPT of ``spec`` (seed 0, ``spec``'s dropout drawn from one stream), its
    parameters in ``precision``."""
    model = nn.GPT(spec["vocab"], spec["seq"], spec["d_model"], spec["heads"], spec["layers"],
                   np.random.default_rng(0), dropout=spec.get("dropout", 0.0))
    nn.set_dropout_generator(model, DeviceRandom(0, 0))
    return model.to_dtype(dtype_of(precision, backend.xp_default()))


def build(name: str, spec: dict, task: Task, mesh=None):
    """Contender ``name`` ("single", "dp", "zero1"…) on :func:`gpt` of ``spec``, recomputing
    ``spec``'s layers, with AdamW (in 16 bits on fp32 masters, with ``task.scaler`` if any)."""
    precision = spec.get("precision", "fp32")
    model = gpt(spec, precision)
    recompute(chosen(model, spec.get("recompute", "none")))

    def make_optimizer(params):  # over what the contender steps: the model, or a rank's chunks
        adamw = optim.AdamW(params, ADAM_LR, weight_decay=0.0)
        return adamw if precision == "fp32" else MixedPrecision(adamw, task.scaler)

    if name == "single":
        return SingleDevice(model, make_optimizer, task)
    kw = {"bucket_bytes": spec["bucket_kib"] << 10, "grad_clip": spec["grad_clip"]}
    stage, offload = stage_of(name)
    if stage == 0:
        return DataParallel(model, make_optimizer, task, mesh, **kw)
    return STAGES[stage](model, make_optimizer, task, mesh, **kw, offload=offload)


def language(spec: dict) -> tuple[Task, list]:
    """The synthetic language task of ``spec`` and its first batches, on the device."""
    task = Task(SyntheticLanguage(spec["vocab"], ORDER, spec["seq"], seed=0), None, "tok")
    return task, [task.batch(k, spec["batch"])[0] for k in range(spec["steps"])]


def memory(comm, cfg: dict) -> dict:
    """Per model, its Ψ and what a Ledger counts while each of ``cfg["contenders"]`` trains it
    for ``steps`` steps: this rank's peaks by part and the graph's bytes after forward."""
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


def seconds(events) -> float:
    """The seconds the tracer's ``events`` span, summed."""
    return sum(e.end - e.start for e in events) / 1e9


def phases(strategy, tracer: Tracer, batch):
    """A step of ``strategy`` on ``batch`` that returns its seconds: in all, forward, copying to
    and from the host, and in the optimizer region less its collectives (the norm's all-reduce)."""
    update = getattr(strategy, "update", None)  # ZeRO's update of the shards

    def run() -> tuple[float, ...]:
        tracer.events.clear()
        copied, start = getattr(update, "copy_s", 0.0), time.perf_counter()
        strategy.step(batch)
        total = timing.clock() - start
        forward, optimizer = ([e for e in tracer.events if e.cat == "compute" and e.name == name]
                              for name in ("forward", "optimizer"))
        waits = [e for e in tracer.events if e.cat == "comm"
                 and any(o.start <= e.start < o.end for o in optimizer)]
        return (total, seconds(forward), getattr(update, "copy_s", 0.0) - copied,
                seconds(optimizer) - seconds(waits))

    return run


def step_times(comm, cfg: dict) -> dict:
    """Each contender's step in turns (the slowest rank's median) and rank 0's medians of its
    :func:`phases`; with ``"trace"``, one ZeRO-3 step more, every rank's into that trace."""
    spec = cfg["models"]["cli"]
    task, (batch,) = language({**spec, "steps": 1})
    mesh = Mesh(comm)  # pure data parallelism
    comm.tracer = tracer = Tracer(comm.rank)
    built = {name: build(name, spec, task, mesh) for name in CONTENDERS}
    samples = timing.turns({name: phases(s, tracer, batch) for name, s in built.items()},
                           cfg["repeats"], cfg["warmup"], start=lambda: timing.sync(comm))
    worst = timing.slowest(comm, [[s[0] for s in samples[name]] for name in CONTENDERS])  # (C, R)
    if cfg["trace"]:
        comm.tracer = tracer = Tracer(comm.rank)
        tracer.align(comm.barrier)  # every rank's clock zeroed at one barrier
        built["zero3"].step(batch)
        ranks = comm.allgather_obj(tracer.export(), "trace")
        if comm.rank == 0:
            write_chrome(cfg["trace"], ranks)
    comm.tracer = None
    for strategy in built.values():
        strategy.close()
    mesh.free()
    return {"step_s": dict(zip(CONTENDERS, np.median(worst, axis=1).tolist())),
            "phases_s": {name: np.median(samples[name], axis=0).tolist() for name in CONTENDERS}}


def checkpoints(comm, cfg: dict) -> dict:
    """ZeRO-3 saved and resumed in turns, by each rank's pieces or through rank 0's one file: the
    slowest rank's medians, and the bytes the busiest rank writes each way."""
    spec, mesh = cfg["models"]["large"], Mesh(comm)
    task, (batch,) = language({**spec, "steps": 1})
    saved, fresh = build("zero3", spec, task, mesh), build("zero3", spec, task, mesh)
    saved.step(batch)
    root = comm.allgather_obj(tempfile.mkdtemp() if comm.rank == 0 else None, "folder")[0]
    pieces, single = Path(root, "pieces"), Path(root, "single")

    def through_rank_0():
        state = saved.state_dict()  # whole on rank 0, None on the others
        if comm.rank == 0:
            arrays, scalars = split_state(state)
            save_checkpoint(single, arrays, {"step": 1, **scalars})

    def read(directory: Path):  # this rank's chunks: of its pieces, or of the file read whole
        with open_checkpoint(directory) as stored:
            fresh.load_pieces(stored)

    ways = {"pieces save": lambda: save_sharded(pieces, *saved.pieces(), {"step": 1}, comm),
            "rank 0 save": through_rank_0, "pieces load": lambda: read(pieces),
            "rank 0 load": lambda: read(single)}
    ways["pieces save"](), ways["rank 0 save"]()  # what the loads read
    timed = turns(comm, {way: Timed(run) for way, run in ways.items()}, cfg)
    files = [pieces / f"rank{comm.rank}.pieces.npz", single / "model.npz", single / "optim.npz"]
    size = [path.stat().st_size if path.exists() else 0 for path in files]
    written = comm.allgather_obj([size[0], size[1] + size[2]])
    for strategy in (saved, fresh):
        strategy.close()
    mesh.free()
    comm.barrier()
    if comm.rank == 0:
        shutil.rmtree(root)
    return {"timed": timed, "written": [max(w[i] for w in written) for i in range(2)]}


def world(comm, cfg: dict) -> dict:
    """A world size's job: every contender's bytes, then their steps, then the checkpoints."""
    return {"memory": memory(comm, {**cfg, "contenders": CONTENDERS}),
            "timing": step_times(comm, cfg), "checkpoints": checkpoints(comm, cfg)}
