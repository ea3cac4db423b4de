"""The strategy-agnostic training loop: schedule, batches, steps, metrics, checkpoints, summary."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np

from ..backend import sync
from ..comm.window import RemoteArray
from ..trace.chrome import write_chrome
from .checkpoint import CheckpointError
from .divergence import BadSteps, held_out_diverged
from .precision import AtPrecision
from .progress import Progress
from .sharded import save_sharded
from .task import HALF_SQUARED, eval_rows
from .window import Window


class Trainer:
    """Runs ``strategy.step`` over the task's batches from step 0 (or a checkpoint) to the end.

    Everything a resumed run needs is a function of the step number (the batch, the learning
    rate) or is saved in the checkpoint (parameters, optimizer state, the dropout generator), so
    stopping and resuming continues bit-identically. A step that the strategy skipped (its loss or
    gradient was not finite) is recorded, and ``--max-bad-steps`` of them in a row raise
    :class:`Diverged` on every rank.
    """

    def __init__(self, cfg, strategy, task, schedule, dropout_gen, comm=None,
                 workers: int | None = None):
        self.cfg, self.strategy, self.task, self.schedule = cfg, strategy, task, schedule
        self.dropout_gen, self.comm = dropout_gen, comm
        self.rank, self.world = (0, 1) if comm is None else (comm.rank, comm.size)
        self.workers = workers or self.world  # the ranks that compute: servers do not
        self.is_logger = self.rank == 0  # logs, shows progress, evaluates, saves checkpoints
        self.step = 0
        self.names = [name for name, _ in task.model.named_parameters()]  # optimizer's order
        # fp16 overflows by design, and the loss scale answers it (an "overflow" record): NumPy
        # need not warn of it too
        self._overflows = {"over": "ignore", "invalid": "ignore"} \
            if cfg.train.precision == "fp16" else {}
        self.bad = BadSteps(cfg.train.max_bad_steps)
        self.log = self.bar = None  # the metrics file and the progress bar, while run() runs
        # where ranks judge their steps alone, the first to diverge reports: a counter on rank 0
        self._reports = None if strategy.lockstep or self.world == 1 else \
            RemoteArray(comm, 1, np.int64)

    def save(self, directory: str) -> None:
        """Every rank writes the pieces of the state it holds (:meth:`Strategy.pieces`), rank 0
        the meta and each rank's dropout stream, in one sharded checkpoint. Every rank calls
        this at the same step: the pieces may be a collective (local SGD gathers every rank's
        replica on rank 0)."""
        stream = self.dropout_gen.state
        streams = [stream] if self.comm is None else self.comm.allgather_obj(stream)
        pieces, scalars = self.strategy.pieces()
        meta = {"step": self.step, "config": self.cfg.to_dict(), "parameters": self.names,
                "dropout_rng": streams, "vocabulary": self.task.vocabulary,
                "loss_scale": self.task.scaler and self.task.scaler.state_dict()}
        save_sharded(directory, pieces, scalars, meta, self.comm)

    def restore(self, stored, directory: str) -> None:
        """Continue from a checkpoint that every rank has opened (a
        :class:`~scratchpar.train.stored.Stored`), whatever world size and layout wrote it:
        the strategy reads what this rank holds, the data position is the step number. A rank
        the writing world did not have keeps its fresh dropout stream. Raises CheckpointError
        on this rank alone when its part does not fit (the caller makes the ranks agree)."""
        t, meta = self.cfg.train, stored.meta
        try:
            step, stop = meta["step"], t.stop_after or t.steps
            if type(step) is not int:  # a bool is an int to isinstance
                raise ValueError(f"its step, {step!r}, is not an integer")
            if not 0 <= step <= stop:
                raise ValueError(f"it is at step {step}, and this run stops at step {stop}")
            self.strategy.load_pieces(AtPrecision(stored, self.names, t.precision != "fp32"))
            if self.task.scaler is not None and meta.get("loss_scale"):
                self.task.scaler.load_state_dict(meta["loss_scale"])
            if self.rank < len(meta["dropout_rng"]):
                self.dropout_gen.state = meta["dropout_rng"][self.rank]
            self.step = step
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
            raise CheckpointError(f"{directory} does not fit this run: {e}") from e

    def run(self) -> dict | None:
        """Train; rank 0 returns the summary (held-out loss, floor, gap, throughput), the other
        ranks None."""
        t = self.cfg.train
        stop = t.stop_after or t.steps
        self.log = _open_metrics(t.metrics, append=bool(t.resume)) if self.is_logger else None
        self._write({"event": "start", "step": self.step, "unit": self.task.unit,
                     "floor": self.task.floor(), "world": self.world,
                     "config": self.cfg.to_dict()})
        self.bar = Progress(stop, self.step, t.progress and self.is_logger, self.task.unit)
        window = Window(self.task.unit, self.world)
        run_start, first, units_done = time.perf_counter(), self.step, 0
        self.reached = None  # the step a record's loss first met --target-loss
        while self.step < stop and self.reached is None:
            units_done += self._train_step(window, run_start, stop)
        self.bar.close()
        report = self.strategy.shutdown()  # parameter servers: the workers leave
        if self.step == t.steps:
            self.strategy.finish()  # local SGD averages the replicas
        elapsed = time.perf_counter() - run_start
        if t.save:
            self.save(t.save)
        if t.trace:
            self.write_trace(t.trace)
        if self._reports is not None:
            self._reports.free()
        scores = self.held_out()
        self.strategy.close()
        if self.strategy.mesh is not None:  # the mesh the run made for it (train/build.py)
            self.strategy.mesh.free()
        if not self.is_logger:
            return None
        summary = self.summary(scores, units_done, elapsed, self.step - first)
        if report is not None:
            summary["strategy"] = report
        self._write({"event": "final", **summary})
        self.log.close()
        if isinstance(summary["eval_loss"], str):  # not finite
            raise held_out_diverged(self.cfg, summary)
        return summary

    def _train_step(self, window: Window, run_start: float, stop: int) -> int:
        """One step at the scheduled rate, its verdict counted (too many bad steps in a row
        raise :class:`Diverged`), its window recorded every ``log_every`` steps, and a
        checkpoint every ``save_every``. Returns its units."""
        t = self.cfg.train
        lr = self.schedule(self.step)
        self.strategy.optimizer.lr = lr
        batch, units = self.task.batch(self.step, t.batch_size,
                                       self.strategy.rows(t.batch_size))
        with np.errstate(**self._overflows):
            metrics = self.strategy.step(batch)
        metrics.update(self.strategy.routing())  # a sparse GPT's
        units = int(metrics.pop("units")) if units is None else units
        self.step += 1
        skip = self.bad.count(self.step, metrics, lr)
        window.add(metrics, units, skipped=bool(metrics.get("skipped")))
        if skip is not None:
            self._write(skip)
            if self.bad.exhausted:
                self._diverged(skip)
        if self.step % t.log_every == 0 or self.step == stop:
            sync()
            now = time.perf_counter()
            record = window.record(self.step, lr, metrics, now)
            record["elapsed_s"] = now - run_start
            self._write(record, flush=True)
            self.bar.show(record["loss"], record[window.rate])
            if t.target_loss is not None and record["loss"] is not None \
                    and record["loss"] <= t.target_loss:
                self.reached = self.step
        self.bar.update()
        if t.save and t.save_every and self.step % t.save_every == 0:
            self.save(t.save)
        return units

    def _diverged(self, skip: dict) -> None:
        """Too many bad steps in a row: record it, close the log, raise (every rank alike, or
        this rank alone where the strategy's ranks do not judge each step alike)."""
        self.bar.close()
        self._write({"event": "diverged", "step": self.step})
        if self.log:
            self.log.close()
        error = self.bad.error(self.cfg, skip)
        error.alone = not self.strategy.lockstep
        raise error

    def first_to_report(self) -> bool:
        """Whether this rank is the first to claim the job's one report (every rank alike
        where the ranks step together)."""
        return self._reports is None or self._reports.fetch_add(0, 1) == 0

    def interrupted(self) -> None:
        """Ctrl-C: the bar ends its line, and the metrics file records where the run stopped."""
        if self.bar is not None:
            self.bar.close()
        if self.log is not None and not self.log.closed:
            self._write({"event": "interrupted", "step": self.step}, flush=True)

    def _write(self, record: dict, flush: bool = False) -> None:
        """One JSON line of the metrics file (rank 0's)."""
        if self.log:
            self.log.write(json.dumps(record) + "\n")
            if flush:
                self.log.flush()

    def write_trace(self, path: str) -> None:
        """Every rank's regions, gathered and written by rank 0 as one Chrome trace."""
        ranks = self.comm.allgather_obj(self.comm.tracer.export(), "trace events")
        if self.is_logger:
            write_chrome(path, ranks)

    def held_out(self) -> dict | None:
        """The held-out figures: scored by every rank in the training layout, where the
        strategy can (no rank gathers the model), else by rank 0 on the whole model that
        ``gather_model`` gives it. ``None`` on the ranks that do not log them."""
        t = self.cfg.train
        if self.strategy.scores_in_layout:
            scores = self.task.scores(t.eval_batches, t.batch_size, score=self.strategy.score)
            return scores if self.is_logger else None
        self.strategy.gather_model()  # e.g. a parameter server's ranges → rank 0
        if not self.is_logger:
            return None
        return self.task.scores(t.eval_batches, t.batch_size, eval_rows(self.cfg, self.world))

    def summary(self, scores: dict, units: int, elapsed: float, steps: int) -> dict:
        t = self.cfg.train
        scores = dict(scores)
        rate = units / elapsed if elapsed > 0 else 0.0  # units of the global batches
        return {"step": self.step, "steps_run": steps, "eval_loss": scores.pop("loss"),
                **scores, "skipped_steps": self.bad.total,
                "overflow_steps": self.bad.overflows, "unit": self.task.unit,
                "measure": self.task.measure,
                "units_per_s": rate, "units_per_s_per_rank": rate / self.world,
                "units_per_s_per_worker": rate / self.workers, "workers": self.workers,
                "world": self.world, "elapsed_s": elapsed,
                **({"reached_step": self.reached} if t.target_loss is not None else {})}


def _open_metrics(path: str, append: bool):
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return open(path, "a" if append else "w")


FLOOR_FOR_PERCENT = 1e-9  # nats: below it the gap is shown alone


def format_summary(s: dict) -> str:
    """One line: held-out loss, the floor (an entropy, where the loss is in nats) and the gap
    to it, and throughput."""
    unit = "token" if s["unit"] == "tok" else "sample"
    nats = s["measure"] == "nats"
    floor = "entropy floor" if nats else "floor"
    line = (f"final: step {s['step']} · held-out loss {s['eval_loss']:.4f} "
            + (f"nats/{unit}" if nats else f"({s['measure']} per {unit})"))
    if s.get("bits_per_char") is not None:
        line += f" = {s['bits_per_char']:.4f} bits/char"
    if s["floor"] is not None:
        line += f" · {floor} {s['floor']:.4f} · gap {s['gap']:+.4f}"
        if nats and s["floor"] > FLOOR_FOR_PERCENT:  # of a zero floor (clean labels): noise
            line += f" ({100 * s['gap'] / s['floor']:.1f}% above)"
        elif s["measure"] == HALF_SQUARED:  # ½·e² against the noise's σ²/2: say it as σ
            line += (f" · RMSE {math.sqrt(2 * s['eval_loss']):.4f} against the noise's σ "
                     f"{math.sqrt(2 * s['floor']):.4f}")
    else:
        line += f" · {floor} unknown for this data"
    if s.get("accuracy") is not None:
        line += f" · accuracy {100 * s['accuracy']:.1f}%"
    line += f" · {s['units_per_s']:,.0f} {s['unit']}/s"
    if s["world"] > 1:
        workers = s.get("workers", s["world"])
        line += (f" ({s['units_per_s_per_rank']:,.0f} per rank × {s['world']})"
                 if workers == s["world"] else
                 f" ({s['units_per_s_per_worker']:,.0f} per worker × {workers} of "
                 f"{s['world']} ranks)")
    line += f" · {s['steps_run']} steps in {s['elapsed_s']:.1f} s"
    if s.get("overflow_steps"):
        line += f", {s['overflow_steps']} skipped as the loss scale overflowed"
    if "reached_step" in s:
        line += (f" · the target loss reached at step {s['reached_step']}"
                 if s["reached_step"] is not None else " · the target loss not reached")
    return line + (f"\n{s['strategy']['summary']}" if "strategy" in s else "")
