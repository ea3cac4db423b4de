"""The context benchmark (docs/context_parallel.md), each measurement beside its formula:
activations and the longest sequence against cp, causal balance, bytes sent, a step at cp = 2
and the ring's overlap."""

from __future__ import annotations

import bisect
import functools
import itertools

import numpy as np

from ...jobs.harness import Benchmark, Ranks, draw_figures, finish, headline
from ...jobs.mpijob import job
from ...parallel.context import SCHEMES, positions, traffic
from ...parallel.context.ring import visible
from ...table import table
from ...trace.figure import pyplot
from ...train.cli import load_config
from ...train.memory import PROCESS_BYTES, needed
from ...train.memory_context import attention
from ...train.memory_models import GiB, MiB, Sizes, gpt_layer

WORKER = "scratchpar.bench.context.worker"
CONFIG = {"block": {"batch": 2, "seq": 256, "d_model": 64, "heads": 8, "kv_heads": 4},
          "fits": {"d_model": 256, "heads": 8, "layers": 4, "budget_gib": 2, "grid": 8},
          "balance": {"seq": 1024, "cps": [2, 4, 8]},
          "gpt": {"batch": 1, "seq": 1024, "d_model": 64, "heads": 4, "layers": 2},
          "layout": "zigzag", "warmup": 2, "repeats": 10}
QUICK = {"block": {"batch": 2, "seq": 16, "d_model": 16, "heads": 8, "kv_heads": 4},
         "fits": {"d_model": 32, "heads": 4, "layers": 1, "budget_gib": 1, "grid": 8},
         "balance": {"seq": 48, "cps": [2, 4, 8]},
         "gpt": {"batch": 1, "seq": 32, "d_model": 16, "heads": 4, "layers": 1},
         "layout": "zigzag", "warmup": 1, "repeats": 2}
FLOAT32 = 4
TIMED = 2  # the machine has 2 cores: only cp ≤ 2 is real compute
TITLES = {"activations": "1. activations per rank of one block: graph_bytes against the estimate",
          "fits": "2. the longest sequence a rank's budget fits, by the command's estimate",
          "balance": "3. causal balance: the busiest rank's work ÷ the mean, beside its formula",
          "traffic": "4. bytes each rank sends per layer, traced at isend, against traffic.py's",
          "steps": f"5. a training step at cp = {TIMED} against one rank, slowest rank's median",
          "overlap": "   the ring's overlap per step: waited on K, V blocks posted a block "
                     "earlier; skew, of it, before the other rank reached its own wait; exposed, "
                     "the rest; alone, the same blocks by blocking sendrecv; hidden = 1 − "
                     "exposed/alone; hand-ons: dK, dV by blocking sendrecv"}


def estimated(b: dict, cp: int, scheme: str) -> tuple[float, float]:
    """The estimate's bytes of one block's forward graph on a cp rank, and of their scores:
    ``gpt_layer`` on its B·T/cp tokens with what ``memory_context.attention`` says it keeps."""
    core = attention(b["seq"], b["heads"], b["d_model"], cp, scheme)
    n, c = b["batch"] * core.tokens, b["d_model"]
    sizes = Sizes(n, c, n, c, 4 * c, b["batch"] * core.kept)
    # the all-gathered K and V, the ring's fp32 output and log-sum-exp, the block's input, output
    ends = FLOAT32 * (b["batch"] * (core.gathered * c + core.wide) + 2 * n * c)
    return gpt_layer(sizes, FLOAT32, FLOAT32, False, "none") + ends + core.mask, \
        FLOAT32 * sizes.scores


def activation_rows(blocks: dict, b: dict) -> list[dict]:
    """Per cp and scheme, the busiest rank's held bytes against :func:`estimated`."""
    rows, one = [], blocks[1][0]["one device"]["activation_bytes"]
    for cp, ranks in blocks.items():
        for scheme in (s for s in ranks[0] if not s.endswith("grouped")):
            held = max(mine[scheme]["activation_bytes"] for mine in ranks)
            formula, scores = estimated(b, cp, scheme if cp > 1 else "ring")
            rows.append({"cp": cp, "scheme": scheme, "held B": held, "estimate B": int(formula),
                         "scores B": int(scores), "held/one device": held / one})
    return rows


def traffic_rows(blocks: dict, b: dict) -> list[dict]:
    """Per cp ≥ 2, scheme (with a key/value head a query head, and grouped: ``kv_heads``) and
    pass, rank 0's bytes sent against ``traffic``'s messages, with a = one rank's activation
    bytes (B, T/cp, C) and S·b·h·β = cp·a the sequence's."""
    rows, grouped = [], b["heads"] // b["kv_heads"]
    for cp, ranks in blocks.items():
        a = b["batch"] * (b["seq"] // cp) * b["d_model"] * FLOAT32
        for (scheme, r), phase in itertools.product(
                [(s, r) for s in (SCHEMES if cp > 1 else ()) for r in (1, grouped)],
                ("forward", "backward")):
            name = scheme if r == 1 else f"{scheme}, grouped"
            seen = [mine[name][phase] for mine in ranks]
            formula = sum(m.wire(cp) * m.count for m in traffic(scheme, cp, a, 1, per_group=r)
                          if m.behind == phase)
            rows.append({"cp": cp, "scheme": name, "pass": phase, "sent B": seen[0],
                         "formula B": int(formula), "sent/Sbhβ": seen[0] / (cp * a),
                         "every rank": all(s == seen[0] for s in seen)})
    return rows


def flags(f: dict, cp: int, scheme: str, t: int) -> list[str]:
    """The training command's flags for the GPT of ``f`` on T = ``t`` on a cp group."""
    return ["--strategy", "hybrid", "--cp", str(cp), "--cp-attention",
            scheme if cp > 1 else "ring", "--model", "gpt", "--d-model", str(f["d_model"]),
            "--n-heads", str(f["heads"]), "--n-layers", str(f["layers"]), "--dropout", "0",
            "--microbatches", "1", "--seq-len", str(t)]


def need(f: dict, cp: int, scheme: str, t: int) -> int:
    """A rank's bytes at T = ``t`` by the training command's estimate, the bound it refuses a
    run by (as ``batch fits`` takes it)."""
    cfg = load_config([*flags(f, cp, scheme, t), "--batch-size", "1"], world_size=cp)
    return needed(cfg, cp)


def longest(f: dict, cp: int, scheme: str) -> int | None:
    """The longest T (None: none), a multiple of ``grid``, whose estimate (``batch fits``' need)
    fits the budget less a process's own: doubling, then bisecting, as the estimate grows."""
    have = f["budget_gib"] * GiB - PROCESS_BYTES
    at = functools.cache(lambda k: need(f, cp, scheme, k * f["grid"]))
    high = 1  # multiples of grid: the first found not to fit
    while at(high) <= have:
        high *= 2
    return f["grid"] * bisect.bisect_right(range(1, high), have, key=at) or None


def fit_rows(f: dict, cps: list[int]) -> list[dict]:
    """Per cp and scheme, the :func:`longest` sequence, and against one device's."""
    rows = [{"cp": cp, "scheme": scheme, "longest T": longest(f, cp, scheme)} for cp in cps
            for scheme in (SCHEMES if cp > 1 else ("one device",))]
    one = rows[0]["longest T"]
    return [{**r, "vs cp 1": r["longest T"] / one if one and r["longest T"] else None}
            for r in rows]


def work(t: int, cp: int, layout: str) -> tuple[list[int], list[int]]:
    """Per rank, the query-key pairs it scores causally, and the score entries the ring computes:
    of each block, the rows and columns bounding what its queries see (``ring.visible``)."""
    held = [positions(t, cp, r, layout) for r in range(cp)]
    pairs = [int((mine + 1).sum()) for mine in held]
    seen = [[visible(mine, theirs, True) for theirs in held] for mine in held]
    ring = [int(sum((rows.stop - rows.start) * (cols.stop - cols.start)
                    for rows, cols, _ in filter(None, blocks))) for blocks in seen]
    return pairs, ring


def balance_rows(t: int, cps: list[int]) -> list[dict]:
    """Busiest ÷ mean per cp and layout, beside its formula (Brandon et al. 2023, §3; derived in
    docs/context_parallel.md): contiguous, pairs (2T − T/cp + 1)/(T + 1), ring 2cp/(cp + 1) and
    all of T²/cp; zig-zag, 1 and 1, and (cp + 1)/(2cp) of T²/cp."""
    rows = []
    for cp, layout in itertools.product(cps, ("contiguous", "zigzag")):
        pairs, ring = work(t, cp, layout)
        flat = layout == "zigzag"
        rows.append({"cp": cp, "layout": layout,
                     "pairs busiest/mean": max(pairs) / np.mean(pairs),
                     "formula": 1.0 if flat else (2 * t - t / cp + 1) / (t + 1),
                     "ring busiest/mean": max(ring) / np.mean(ring),
                     "ring formula": 1.0 if flat else 2 * cp / (cp + 1),
                     "ring busiest/(T²/cp)": max(ring) / (t * t / cp),
                     "its formula": (cp + 1) / (2 * cp) if flat else 1.0,
                     "pairs": pairs, "ring": ring})
    return rows


def overlap_rows(steps: dict) -> list[dict]:
    """Per rank: the time its posted K, V blocks kept it waiting, less the skew, against the
    same blocks exchanged blocking, alone."""
    rows = []
    for r, o in enumerate(steps["overlap"]):
        exposed, alone = o["kv_wait_s"] - o["skew_s"], o["kv_blocks"] * steps["exchange_s"]
        rows.append({"rank": r, "step ms": 1e3 * o["step_s"], "K,V blocks": o["kv_blocks"],
                     "waited ms": 1e3 * o["kv_wait_s"], "skew ms": 1e3 * o["skew_s"],
                     "exposed ms": 1e3 * exposed, "alone ms": 1e3 * alone,
                     "hidden": 1 - exposed / alone, "hand-ons": o["handons"],
                     "hand-on ms": 1e3 * o["handon_s"]})
    return rows


def draw(directory: str, record: dict) -> list[str]:
    """context.png: per scheme, a rank's activations against cp beside the estimate; and each
    rank's causal work at the largest cp, contiguous against zig-zag."""
    fig, (left, right) = pyplot().subplots(1, 2, figsize=(12, 4.6))
    rows = record["activations"]
    for i, scheme in enumerate(SCHEMES):
        mine = [r for r in rows if r["cp"] == 1 or r["scheme"] == scheme]
        for key, style, what in (("held B", "o-", "traced"), ("estimate B", "x--", "estimate")):
            left.plot([r["cp"] for r in mine], [r[key] / MiB for r in mine], style,
                      color=f"C{i}", label=f"{scheme}, {what}")
    cps = sorted({r["cp"] for r in rows})
    left.set_xscale("log", base=2)
    left.set(yscale="log", xticks=cps, xticklabels=cps, xlabel="cp",
             ylabel="MiB per rank (busiest)", title="one block's forward graph on a cp rank")
    cp = max(r["cp"] for r in record["balance"])
    largest = [r for r in record["balance"] if r["cp"] == cp]
    for i, r in enumerate(largest):
        x, color = np.arange(cp) + 0.4 * i - 0.2, "C0" if r["layout"] == "contiguous" else "C2"
        right.bar(x, r["pairs"], 0.4, color=color, label=f"{r['layout']}: pairs scored")
        right.bar(x, r["ring"], 0.4, fill=False, edgecolor=color, linestyle="--",
                  label=f"{r['layout']}: entries the ring computes")
    right.set(xlabel="rank", ylabel="query-key pairs",
              ylim=(0, 1.3 * max(max(r["ring"]) for r in largest)),
              title=f"causal work per rank, cp = {cp}, T = {record['config']['balance']['seq']}")
    return [finish(fig, f"{directory}/context.png", (left, right))]


def measure(args) -> dict:
    """The jobs run and every table printed: what ``--json`` writes."""
    cfg, cps = QUICK if args.quick else CONFIG, sorted({1, *args.ranks})  # cp 1: the baseline
    blocks = {cp: job(cp, f"{WORKER}:blocks", cfg, args.device) for cp in cps}
    steps = job(TIMED, f"{WORKER}:steps", cfg, args.device)
    timed = steps["timed"]
    one, split = timed["one device"]["median_s"], {s: timed[s]["median_s"] for s in SCHEMES}
    record = {"config": cfg, "ranks": cps, "activations": activation_rows(blocks, cfg["block"]),
              "fits": fit_rows(cfg["fits"], cps), "traffic": traffic_rows(blocks, cfg["block"]),
              "balance": balance_rows(cfg["balance"]["seq"], cfg["balance"]["cps"]),
              "steps": [{"scheme": s, "one device ms": 1e3 * one, "cp 2 ms": 1e3 * t,
                         "speed-up": one / t, "efficiency": one / t / TIMED}
                        for s, t in split.items()],
              "overlap": overlap_rows(steps), "timed": timed, "exchange_s": steps["exchange_s"]}
    print(f"{headline('context benchmark', args)}; {cfg['layout']} layout, float32")
    for key, title in TITLES.items():  # the figure's lists of each rank's work apart
        rows = [{k: v for k, v in r.items() if k not in ("pairs", "ring")} for r in record[key]]
        print(table(title, rows, formats={"pairs busiest/mean": ".3f", "formula": ".3f"}))
    return {**record, "figures": draw_figures(args.figures, draw, record)}


BENCHMARK = Benchmark("context parallelism: activation bytes per rank and the longest sequence "
                      "against cp, causal balance, bytes per layer, a step at cp = 2",
                      "a tiny block and GPT", measure, figures="context.png",
                      ranks=Ranks((1, 2, 4), what="cp sizes",
                                  more=f"the step is timed in a job of its own at cp = {TIMED}"))
