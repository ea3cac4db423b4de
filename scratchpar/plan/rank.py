"""Every layout of a run on a world, predicted and ranked: the layouts that fit first, and of
them those that train as one device would (the rest change what a step learns, not only its
speed), fastest first; then those that do not fit, closest to fitting first, with why."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..table import table
from ..train.progress import Progress
from .layouts import Layout, layouts
from .memory import Fit, per_rank
from .predict import from_profile
from .step import Prediction

LANGUAGE_MODELS = ("gpt", "lstm", "rnn")
# The layouts whose step is not one device's: stale or averaged updates change what is learnt
# per step, not only how fast (local SGD, EASGD, Hogwild, asynchronous servers, PipeDream).
APPROXIMATE = {"local-sgd", "easgd", "hogwild"}


def exact(cfg) -> bool:
    """Whether the layout's step equals one device's on the whole batch."""
    t = cfg.train
    return not (t.strategy in APPROXIMATE or (t.strategy == "ps" and t.ps_mode != "sync")
                or (t.strategy in ("pipeline", "hybrid") and t.pp_schedule == "pipedream"))


@dataclass(frozen=True)
class Ranked:
    """A layout, its memory, and its predicted step (and what it moves) on ``world`` ranks of
    ``profile``, predicted when first asked: a layout that does not fit is timed only if shown."""

    layout: Layout
    fit: Fit
    world: int
    profile: object

    @functools.cached_property
    def step(self) -> Prediction:
        return from_profile(self.layout.cfg, self.world, self.profile)

    @property
    def per_s(self) -> float:
        """Tokens a second for a language model, else samples."""
        cfg = self.layout.cfg
        per_row = cfg.data.seq_len if cfg.model.kind in LANGUAGE_MODELS else 1
        return cfg.train.batch_size * per_row / self.step.step_s

    @property
    def exposed_share(self) -> float:
        """The share of communication on the critical path: exposed seconds over all of it."""
        total = sum(self.step.communication_s.values())
        return self.step.exposed_s / total if total else 0.0


def ranked(run: list[str], world: int, profile, budget: int | None = None,
           shown: bool = False) -> list[Ranked]:
    """The run's layouts on ``world`` ranks of ``profile`` (a device of ``budget`` bytes, if
    given): those that fit first, of them those whose step is one device's, each group by
    predicted step time, then by memory; then those that do not fit, those whose step is one
    device's first, each group by the memory they need. Only the layouts that fit are timed
    here, the rest as their rows are read: of a 1T GPT's 5,511 layouts on 3,072 A100s, 15 fit,
    and most of the others' time is their pipelines. ``shown``: the layouts weighed so far on
    standard error (``train/progress.py``), for a plan of thousands of ranks."""
    every = layouts(run, world)
    progress = Progress(len(every), 0, shown, "layouts", noun="layout")
    fitting, not_fitting = [], []  # (sort key, row)
    for layout in every:
        row = Ranked(layout, per_rank(layout.cfg, world, profile, budget), world, profile)
        if row.fit.fits:
            fitting.append(((not exact(layout.cfg), row.step.step_s, row.fit.need), row))
        else:
            not_fitting.append(((not exact(layout.cfg), row.fit.need), row))
        progress.update()
    progress.close()
    return [row for rows in (fitting, not_fitting)
            for _, row in sorted(rows, key=lambda pair: pair[0])]


SHORT = {"--pp-schedule": "", "--ps-mode": "", "--easgd-mode": "", "--microbatches": "m=",
         "--virtual": "v=", "--zero-stage": "stage ", "--offload": "offload=",
         "--servers": "servers=", "--dp": "dp=", "--pp": "pp=", "--tp": "tp=",
         "--cp": "cp=", "--cp-attention": "", "--recompute": "recompute ", "--ep": "ep="}


def name(layout: Layout) -> str:
    """A layout's flags, short: ``hybrid dp=2 pp=4 tp=2 1f1b m=8 sp``, ``hybrid dp=1 pp=1
    cp=4 tp=2 ring 1f1b m=2 sp``, ``zero stage 3``."""
    words, flags = [layout.flags[1]], list(layout.flags[2:])
    while flags:
        flag = flags.pop(0)
        if flag == "--sequence-parallel":
            words.append("sp")
        elif flag == "--offload" and flags[0] == "none":
            flags.pop(0)
        else:
            words.append(SHORT[flag] + flags.pop(0))
    return " ".join(words)


def show(rows: list[Ranked], world: int, profile) -> str:
    """The ranked table."""
    unit = "tok" if rows and rows[0].layout.cfg.model.kind in LANGUAGE_MODELS else "samples"
    cells = [{"#": i + 1, "layout": name(r.layout), "ms": 1e3 * r.step.step_s,
              "rate": r.per_s, "gib": r.fit.need / 2**30, "fits": r.fit.fits,
              "exact": exact(r.layout.cfg), "mb": r.step.sent_bytes / 2**20,
              "idle": r.step.idle_s / r.step.step_s,
              "exposed": r.exposed_share, "why": r.fit.why_not()} for i, r in enumerate(rows)]
    columns = {"#": "#", "layout": "layout", "step ms": "{ms:.3f}", f"{unit}/s": "{rate:,.0f}",
               "GiB/rank": "{gib:.2f}", "fits": "fits", "= 1 device": "exact",
               "MiB sent": "{mb:.1f}",
               "idle": "{idle:.0%}", "comm exposed": "{exposed:.0%}", "why not": "why"}
    return table(f"{len(rows)} layouts on {world} ranks of {profile.name} ({profile.source})",
                 cells, columns)


def explain(row: Ranked, world: int, run: list[str]) -> str:
    """One layout's breakdown: the step by part, the messages by the compute they hide
    behind, the memory by part, and the line that runs it."""
    s = row.step
    lines = [f"{name(row.layout)} on {world} ranks", "",
             f"step      {1e3 * s.step_s:10.3f} ms",
             f"  forward {1e3 * s.forward_s:10.3f} ms",
             f"  backward{1e3 * s.backward_s:10.3f} ms",
             f"  update  {1e3 * s.update_s:10.3f} ms",
             f"  exposed {1e3 * s.exposed_s:10.3f} ms  of the communication below",
             f"  idle    {1e3 * s.idle_s:10.3f} ms  (a pipeline's bubble, a wait for a server)",
             "communication, by the compute it runs behind:"]
    lines += [f"  {phase or 'nothing':9} {1e3 * t:9.3f} ms"
              for phase, t in sorted(s.communication_s.items())]
    lines += [f"sent      {s.sent_bytes / 2**20:10.1f} MiB a rank, a step",
              f"memory    {row.fit.need / 2**30:10.2f} GiB a rank of "
              f"{row.fit.have / 2**30:.2f}" + ("" if row.fit.fits else
                                               f": does not fit, {row.fit.why_not()}")]
    lines += [f"  {part:11} {size / 2**30:8.3f} GiB" for part, size in row.fit.parts.items()]
    lines += [f"bound     {row.fit.bound / 2**30:10.2f} GiB with an op's temporaries allowed for: "
              "the training command starts a run below it"]
    return "\n".join(lines + ["", row.layout.command(world, run)])
