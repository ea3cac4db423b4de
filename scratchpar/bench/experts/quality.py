"""A sparse GPT's routing and quality, in one process (no MPI): the drops a capacity factor makes
(Fedus et al. 2021, eq. 3), the load over training with and without the balancing loss (eq. 4),
and held-out loss at equal steps against dense GPTs, by training FLOPs a token, 6·N_active
(Kaplan et al. 2020, §2.1)."""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path

import numpy as np

from ...autograd import no_grad
from ...backend import to_host
from ...nn import GPT, MixtureOfExperts, shift
from ...nn.moe import Alone
from ...nn.routing import capacity
from ...train import build_trainer, load_config

SHAKESPEARE = Path(__file__).parents[2] / "data" / "corpora" / "shakespeare.txt"
CONFIG = {"d_model": 32, "heads": 4, "layers": 2, "seq": 32, "batch": 16, "steps": 250,
          "eval_batches": 4, "experts": 8, "k": 2, "capacity_factor": 1.0, "balance": 0.01,
          "factors": [0.5, 0.75, 1.0, 1.25, 1.5, 2.0], "seed": 0}
QUICK = {**CONFIG, "d_model": 16, "seq": 16, "batch": 8, "steps": 20, "eval_batches": 2}


def train(cfg: dict, *flags: str) -> tuple:
    """A single-device run of the training command in this process, the GPT of ``cfg`` with
    ``flags`` last (they override): its trainer, summary, and a record every step."""
    with tempfile.TemporaryDirectory() as folder:
        metrics = Path(folder) / "metrics.jsonl"
        trainer = build_trainer(load_config([
            "--strategy", "single", "--model", "gpt", "--d-model", str(cfg["d_model"]),
            "--n-heads", str(cfg["heads"]), "--n-layers", str(cfg["layers"]),
            "--seq-len", str(cfg["seq"]), "--batch-size", str(cfg["batch"]),
            "--steps", str(cfg["steps"]), "--eval-batches", str(cfg["eval_batches"]),
            "--seed", str(cfg["seed"]), "--dropout", "0", "--log-every", "1", "--no-progress",
            "--metrics", str(metrics), *flags]))
        summary = trainer.run()
        records = [r for r in map(json.loads, metrics.read_text().splitlines())
                   if r["event"] == "step"]
    return trainer, summary, records


def sparse(cfg: dict, factor: float, balance: float) -> list[str]:
    """Flags of the sparse GPT: E experts, k a token, capacity factor c (0: dropless), α."""
    return ["--experts", str(cfg["experts"]), "--top-k", str(cfg["k"]),
            "--capacity-factor", str(factor), "--balance-loss", str(balance)]


class Counted(Alone):
    """One device's routing that keeps each layer's loads too: its assignments per expert (E,)
    before capacity, counted from its choices apart from the routing's own count."""

    def __init__(self):
        self.loads = []

    def tally(self, choice, spec, *rest):
        self.loads.append(np.bincount(to_host(choice).reshape(-1), minlength=spec.count))
        return super().tally(choice, spec, *rest)


def forward(model, ids, factor: float) -> tuple[int, list[np.ndarray]]:
    """One forward of ``ids`` with every sparse layer at capacity factor ``factor``: the
    assignments its layers dropped (their ``stats``), and each layer's loads (:class:`Counted`)."""
    layers = [m for _, m in model.named_modules() if isinstance(m, MixtureOfExperts)]
    specs, counted = [m.spec for m in layers], Counted()
    for layer in layers:
        layer.spec = dataclasses.replace(layer.spec, capacity_factor=factor)
        layer.group = counted
    with no_grad():
        model(ids)
    for layer, spec in zip(layers, specs):
        layer.spec, layer.group = spec, None
    return sum(layer.stats["dropped"] for layer in layers), counted.loads


def drops(cfg: dict) -> dict:
    """Per capacity factor c, of the k·T assignments of held-out batches of T tokens on a GPT
    trained dropless: the share dropped, measured and from the loads, Σᵢ max(routedᵢ − ⌈kTc/E⌉,
    0) (exact given them), and under uniform loads kT/E an expert, max(1 − c, 0)."""
    trainer, _, _ = train(cfg, *sparse(cfg, 0, cfg["balance"]))
    model, task, e, k = trainer.strategy.model.eval(), trainer.task, cfg["experts"], cfg["k"]
    batches = [shift(task.held_out_batch(i, cfg["batch"])[0])[0]
               for i in range(cfg["eval_batches"])]
    rows = []
    for c in cfg["factors"]:
        measured = implied = assignments = busiest = 0
        for ids in batches:
            dropped, loads = forward(model, ids, c)
            t = ids.size
            slots = capacity(t, k, e, c)
            measured += dropped
            implied += sum(int(np.maximum(n - slots, 0).sum()) for n in loads)
            assignments += k * t * len(loads)
            busiest = max(busiest, *(float(n.max() / n.mean()) for n in loads))
        rows.append({"capacity factor": c, "dropped (measured)": measured / assignments,
                     "dropped (from the loads)": implied / assignments,
                     "dropped (uniform loads)": max(k * t / e - slots, 0) * e / (k * t),
                     "equal": measured == implied, "load (busiest)": busiest})
    return {"rows": rows}


def imbalance(cfg: dict) -> dict:
    """Two runs from one seed, with the balancing loss's α and without: each step's load (the
    busiest expert's assignments ÷ the mean), and per run over the last quarter of the steps its
    mean (at most E/k), the share of the k·B·n·L assignments dropped, and the held-out loss."""
    series, rows = {}, []
    assignments = cfg["k"] * cfg["batch"] * cfg["seq"] * cfg["layers"]
    for alpha in (cfg["balance"], 0.0):
        _, summary, records = train(cfg, *sparse(cfg, cfg["capacity_factor"], alpha))
        tail = records[-max(len(records) // 4, 1):]
        series[f"α = {alpha:g}"] = {"step": [r["step"] for r in records],
                                     "load": [r["load"] for r in records]}
        rows.append({"balance loss α": alpha,
                     "load, last quarter": float(np.mean([r["load"] for r in tail])),
                     "ceiling E/k": cfg["experts"] / cfg["k"],
                     "dropped, last quarter": float(np.mean([r["dropped"] for r in tail]))
                     / assignments, "held-out loss": summary["eval_loss"]})
    return {"rows": rows, "series": series}


def counts(model) -> tuple[int, int]:
    """(N_active, N_total): the parameters a token meets (embeddings and head once, attention,
    the router, and k of each sparse layer's E experts), and every parameter."""
    total, idle = model.num_parameters(), 0
    for _, m in model.named_modules():
        if isinstance(m, MixtureOfExperts):
            idle += (m.spec.count - m.spec.top_k) * m.experts[0].num_parameters()
    return total - idle, total


def matched(model, active: int, heads: int, layers: int) -> int:
    """The dense GPT's d_model, a multiple of ``heads``, whose parameters (so 6·N FLOPs a
    token) come nearest ``active``, with the sparse ``model``'s vocabulary and length."""
    (vocab, c), max_len = model.tok.weight.shape, model.pos.weight.shape[0]
    widths = range(c, 3 * c + 1, heads)
    size = {w: GPT(vocab, max_len, w, heads, layers, np.random.default_rng(0)).num_parameters()
            for w in widths}
    return min(widths, key=lambda w: abs(size[w] - active))


def per_flop(cfg: dict) -> dict:
    """Held-out loss after the same steps, on the synthetic language and on Shakespeare: the
    sparse GPT (E, k, capacity factor c), the dense GPT of its d_model (its 4C MLP: one
    expert's parameters a token, not k), and the dense GPT whose 6·N matches the sparse
    6·N_active (6·N_active counts weights alone: attention's scores, 6·L·T·C a token, not)."""
    rows = []
    for data, flags in (("synthetic", []), ("shakespeare", ["--data", str(SHAKESPEARE)])):
        trainer, summary, _ = train(cfg, *flags, *sparse(cfg, cfg["capacity_factor"],
                                                         cfg["balance"]))
        active, total = counts(trainer.strategy.model)
        width = matched(trainer.strategy.model, active, cfg["heads"], cfg["layers"])
        runs = [(f"sparse E {cfg['experts']}, k {cfg['k']}", cfg["d_model"], active, total,
                 summary, f"{cfg['k']} expert MLPs a token")]
        for c, note in ((cfg["d_model"], f"same d_model: 1 MLP a token, not {cfg['k']}"),
                        (width, "d_model for 6·N ≈ the sparse 6·N_active")):
            dense, summary, _ = train(cfg, *flags, "--d-model", str(c))
            n = dense.strategy.model.num_parameters()
            runs.append((f"dense C {c}", c, n, n, summary, note))
        rows += [{"data": data, "model": name, "d_model": c, "active params": n,
                  "total params": every, "train FLOPs/token": 6 * n,
                  "held-out loss": end["eval_loss"], "note": note}
                 for name, c, n, every, end, note in runs]
    return {"rows": rows}
