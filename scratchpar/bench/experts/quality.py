"""A sparse GPT's quality, in one process (no MPI), each measurement beside its formula: the
assignments a capacity factor drops against those its loads imply, Σᵢ max(routedᵢ − ⌈k·T·c/E⌉,
0) / (k·T) (Fedus et al. 2021, eq. 3); the load with and without the balancing loss α·E·Σ fᵢ·Pᵢ
(eq. 4); and held-out loss at equal steps against dense GPTs, by training FLOPs a token,
6·N_active (Kaplan et al. 2020, §2.1). Each function returns its table's rows and a figure's
series, for the experts driver."""

from __future__ import annotations

import dataclasses
import functools
import json
import tempfile
from pathlib import Path

import numpy as np

from ...autograd import functional as F
from ...autograd import no_grad
from ...backend import to_host
from ...nn import GPT, MixtureOfExperts, shift
from ...nn.routing import capacity, route
from ...train import build_trainer, load_config

SHAKESPEARE = Path(__file__).parents[2] / "data" / "corpora" / "shakespeare.txt"
CONFIG = {"d_model": 32, "heads": 4, "layers": 2, "seq": 32, "batch": 16, "steps": 250,
          "eval_batches": 4, "experts": 8, "k": 2, "capacity_factor": 1.0, "balance": 0.01,
          "factors": [0.5, 0.75, 1.0, 1.25, 1.5, 2.0], "seed": 0}
QUICK = {**CONFIG, "d_model": 16, "seq": 16, "batch": 8, "steps": 20, "eval_batches": 2}


def train(cfg: dict, *flags: str) -> tuple:
    """A single-device run of the training command, in this process, with ``flags`` last
    (they override): its trainer, summary, and a record every step."""
    with tempfile.TemporaryDirectory() as folder:
        metrics = Path(folder) / "metrics.jsonl"
        argv = ["--strategy", "single", "--model", "gpt", "--d-model", str(cfg["d_model"]),
                "--n-heads", str(cfg["heads"]), "--n-layers", str(cfg["layers"]),
                "--seq-len", str(cfg["seq"]), "--batch-size", str(cfg["batch"]),
                "--steps", str(cfg["steps"]), "--eval-batches", str(cfg["eval_batches"]),
                "--seed", str(cfg["seed"]), "--dropout", "0", "--log-every", "1",
                "--no-progress", "--metrics", str(metrics), *flags]
        trainer = build_trainer(load_config(argv))
        summary = trainer.run()
        records = [r for r in map(json.loads, metrics.read_text().splitlines())
                   if r["event"] == "step"]
    return trainer, summary, records


def sparse(cfg: dict, factor: float, balance: float) -> list[str]:
    """Flags of the sparse GPT: E experts, k a token, capacity factor c (0: dropless), α."""
    return ["--experts", str(cfg["experts"]), "--top-k", str(cfg["k"]),
            "--capacity-factor", str(factor), "--balance-loss", str(balance)]


def forward(model, ids, factor: float) -> tuple[int, list[np.ndarray]]:
    """One forward of ``ids`` with every sparse layer at capacity factor ``factor``: the
    assignments its layers dropped (their ``stats``), and each layer's assignments per expert
    (E,) before capacity, routed again (``routing.route``, dropless) from the router
    probabilities of the input that layer saw, computed as the layer computes them."""
    layers = [m for _, m in model.named_modules() if isinstance(m, MixtureOfExperts)]
    specs, loads = [m.spec for m in layers], []

    def seen(layer, x):
        tokens = x.reshape(-1, x.shape[-1])
        probs = F.softmax(F.linear(F.wide(tokens), F.wide(layer.router.weight)), axis=-1)
        loads.append(route(to_host(probs.data), layer.spec.top_k, None).routed)
        return type(layer).forward(layer, x)

    for layer, spec in zip(layers, specs):
        layer.spec = dataclasses.replace(spec, capacity_factor=factor)
        layer.forward = functools.partial(seen, layer)  # an instance's own, ahead of the class's
    try:
        with no_grad():
            model(ids)
    finally:
        for layer, spec in zip(layers, specs):
            layer.spec = spec
            del layer.forward
    return sum(layer.stats["dropped"] for layer in layers), loads


def drops(cfg: dict) -> dict:
    """Train dropless (so routing learns unbiased by drops), then per capacity factor c route
    held-out batches of T = B·n tokens: the fraction of k·T assignments a layer dropped,
    measured and from the same forward's loads (exact given them, so the two are equal), and
    under uniform loads kT/E an expert, max(kT/E − ⌈kTc/E⌉, 0)·E/(kT): 0 for c ≥ 1."""
    trainer, _, _ = train(cfg, *sparse(cfg, 0, cfg["balance"]))
    model, task, e, k = trainer.strategy.model.eval(), trainer.task, cfg["experts"], cfg["k"]
    batches = [shift(task.held_out_batch(i, cfg["batch"])[0])[0]
               for i in range(cfg["eval_batches"])]
    rows = []
    for c in cfg["factors"]:
        measured = implied = assignments = 0
        busiest = 0.0
        for ids in batches:
            dropped, loads = forward(model, ids, c)
            t = int(np.prod(ids.shape))
            slots = capacity(t, k, e, c)
            measured += dropped
            implied += sum(int(np.maximum(n - slots, 0).sum()) for n in loads)
            assignments += k * t * len(loads)
            busiest = max(busiest, *(float(n.max() / n.mean()) for n in loads))
        uniform = max(k * t / e - slots, 0) * e / (k * t)
        rows.append({"capacity factor": c, "slots ⌈kTc/E⌉": slots,
                     "dropped (measured)": measured / assignments,
                     "dropped (from the loads)": implied / assignments,
                     "dropped (uniform loads)": uniform, "equal": measured == implied,
                     "load (busiest)": busiest})
    return {"rows": rows, "tokens": t, "batches": len(batches)}


def imbalance(cfg: dict) -> dict:
    """Two runs from one seed at capacity factor c, with the balancing loss's α and with none:
    each step's load (the busiest layer's busiest expert's assignments ÷ the mean), and per
    run its mean over the last quarter of the steps (at most E/k: one expert takes every
    token), the share of the k·B·n·L assignments dropped there, and the held-out loss."""
    series, rows = {}, []
    k, assignments = cfg["k"], cfg["k"] * cfg["batch"] * cfg["seq"] * cfg["layers"]
    for alpha in (cfg["balance"], 0.0):
        _, summary, records = train(cfg, *sparse(cfg, cfg["capacity_factor"], alpha))
        tail = records[-max(len(records) // 4, 1):]
        series[f"α = {alpha:g}"] = {"step": [r["step"] for r in records],
                                     "load": [r["load"] for r in records]}
        rows.append({"balance loss α": alpha, "k": k, "capacity factor": cfg["capacity_factor"],
                     "load, last quarter": float(np.mean([r["load"] for r in tail])),
                     "ceiling E/k": cfg["experts"] / k,
                     "dropped, last quarter": float(np.mean([r["dropped"] for r in tail]))
                     / assignments, "held-out loss": summary["eval_loss"]})
    return {"rows": rows, "series": series}


def draw_imbalance(ax, series: dict) -> None:
    """The load against the step, a line a run, and a balanced router's 1."""
    for i, (name, s) in enumerate(series.items()):
        ax.plot(s["step"], s["load"], color=f"C{i}", label=name)
    ax.axhline(1.0, color="gray", linestyle=":", label="uniform")
    ax.set(xlabel="step", ylabel="load: busiest expert ÷ mean", ylim=(0, None),
           title="expert load over training, with and without the balancing loss")
    ax.legend()


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
