"""The context benchmark (docs/context_parallel.md), each measurement beside its formula: the
activations a rank holds against cp, the longest sequence a memory budget fits, the causal
balance of the two layouts, the bytes each scheme sends per layer, and a step at cp = 2 against
one device with the ring's waits."""

from __future__ import annotations

import functools

import numpy as np

from ...jobs.harness import Benchmark, Ranks, draw_figures, finish, headline
from ...jobs.mpijob import job
from ...parallel.context import SCHEMES, positions, traffic
from ...parallel.context.ring import visible
from ...table import table
from ...trace.figure import pyplot
from ...train.cli import load_config
from ...train.memory import PROCESS_BYTES, estimate, network, on_device, source_of
from ...train.memory_context import attention
from ...train.memory_models import GiB, MiB, Sizes, gpt_layer
from ...train.strategies import REGISTRY
from ...train.task import eval_rows

WORKER = "scratchpar.bench.context.worker"
CONFIG = {"block": {"batch": 2, "seq": 256, "d_model": 64, "heads": 8},
          "fits": {"d_model": 256, "heads": 8, "layers": 4, "budget_gib": 2, "grid": 8},
          "balance": {"seq": 1024, "cps": [2, 4, 8]},
          "gpt": {"batch": 1, "seq": 1024, "d_model": 64, "heads": 4, "layers": 2},
          "layout": "zigzag", "warmup": 2, "repeats": 10}
QUICK = {"block": {"batch": 2, "seq": 16, "d_model": 16, "heads": 4},
         "fits": {"d_model": 32, "heads": 4, "layers": 1, "budget_gib": 1, "grid": 8},
         "balance": {"seq": 48, "cps": [2, 4, 8]},
         "gpt": {"batch": 1, "seq": 32, "d_model": 16, "heads": 4, "layers": 1},
         "layout": "zigzag", "warmup": 1, "repeats": 2}
FLOAT32 = 4
TIMED = 2  # the machine has 2 cores: only cp ≤ 2 is real compute
# ring-flash-attention's README (zhuzilin), fwd + bwd on 8×H800, % of 1/8 of one GPU's
# flash-attention: its naive causal ring, and its zig-zag ring
RING_FLASH = (53.9, 90.2)


def estimated(b: dict, cp: int, scheme: str) -> tuple[float, float]:
    """The estimate's bytes for one block's forward graph on a cp rank, and their attention
    scores: ``memory_models.gpt_layer`` on the rank's B·T/cp tokens with the scores the
    scheme keeps (``memory_context.attention``: (B, H, T, T) on one device, the all-gather's
    (B, H, T/cp, T), Ulysses' (B, H/cp, T, T), none for the ring), the all-gathered K and V,
    the ring's fp32 output and log-sum-exp, the cached causal mask (a byte an entry), and the
    block's input and output."""
    core = attention(b["seq"], b["heads"], b["d_model"], cp, scheme)
    n, c = b["batch"] * core.tokens, b["d_model"]
    sizes = Sizes(n, c, n, c, 4 * c, b["batch"] * core.kept)
    ends = FLOAT32 * (b["batch"] * (core.gathered * c + core.wide) + 2 * n * c)
    return gpt_layer(sizes, FLOAT32, FLOAT32, False, "none") + ends + core.mask, \
        FLOAT32 * sizes.scores


def activation_rows(blocks: dict, b: dict) -> list[dict]:
    """Per cp and scheme, the busiest rank's held bytes against :func:`estimated`."""
    rows, one = [], blocks[1]["per_rank"][0]["one device"]["activation_bytes"]
    for cp, res in blocks.items():
        for scheme in res["per_rank"][0]:
            held = max(mine[scheme]["activation_bytes"] for mine in res["per_rank"])
            formula, scores = estimated(b, cp, scheme if cp > 1 else "ring")
            rows.append({"cp": cp, "scheme": scheme, "held B": held, "estimate B": int(formula),
                         "held/estimate": held / formula, "held - estimate": int(held - formula),
                         "scores B": int(scores), "held/one device": held / one})
    return rows


def traffic_rows(blocks: dict, b: dict) -> list[dict]:
    """Per cp ≥ 2, scheme and pass, rank 0's bytes on the wire against ``traffic``'s messages,
    with a = one rank's activation bytes (B, T/cp, C) and S·b·h·β = cp·a the sequence's."""
    rows = []
    for cp, res in blocks.items():
        a = b["batch"] * (b["seq"] // cp) * b["d_model"] * FLOAT32
        for scheme in SCHEMES if cp > 1 else ():
            for phase in ("forward", "backward"):
                seen = [mine[scheme][phase] for mine in res["per_rank"]]
                formula = sum(m.wire(cp) * m.count for m in traffic(scheme, cp, a, 1)
                              if m.behind == phase)
                rows.append({"cp": cp, "scheme": scheme, "pass": phase,
                             "messages": seen[0]["messages"], "sent B": seen[0]["bytes"],
                             "formula B": int(formula), "sent/formula": seen[0]["bytes"] / formula,
                             "sent/Sbhβ": seen[0]["bytes"] / (cp * a),
                             "every rank": all(s == seen[0] for s in seen),
                             "metadata": seen[0]["metadata"]})
    return rows


def need(given: list[str], cp: int, t: int) -> tuple[int, str]:
    """The training command's estimate for the flags ``given`` at T = ``t`` on cp ranks (the
    bound it refuses a run by), and which of a step and rank 0's held-out evaluation sets its
    activations."""
    cfg = load_config([*given, "--seq-len", str(t)], world_size=cp)
    layout = REGISTRY["hybrid"].activations(cfg, cp)
    model = network(cfg, FLOAT32, source_of(cfg).vocab, layout, eval_rows(cfg, cp))
    bound = "evaluation" if model.evaluation > model.held(layout.stash) else "step"
    return sum(on_device(cfg, estimate(cfg, cp)).values()), bound


def flags(f: dict, cp: int, scheme: str) -> list[str]:
    """The training command's flags for the GPT of ``f`` at batch 1 on a cp group."""
    return ["--strategy", "hybrid", "--cp", str(cp), "--cp-attention",
            scheme if cp > 1 else "ring", "--model", "gpt", "--d-model", str(f["d_model"]),
            "--n-heads", str(f["heads"]), "--n-layers", str(f["layers"]), "--dropout", "0",
            "--batch-size", "1", "--microbatches", "1"]


def longest(f: dict, cp: int, scheme: str) -> dict:
    """The longest T, a multiple of ``grid``, whose estimate fits the budget less what a
    process maps before its arrays (as ``batch fits`` searches by batch): doubling, then
    bisecting, since the estimate grows with T."""
    have = f["budget_gib"] * GiB - PROCESS_BYTES
    at = functools.cache(lambda k: need(flags(f, cp, scheme), cp, k * f["grid"]))
    low, high = 0, 1  # multiples of grid: low fits (0: none yet), high does not
    while at(high)[0] <= have:
        low, high = high, 2 * high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if at(middle)[0] <= have else (low, middle)
    return {"cp": cp, "scheme": scheme, "longest T": low * f["grid"] or None,
            "need MiB": at(low)[0] / MiB if low else None, "bound by": at(low)[1] if low else None}


def fit_rows(f: dict, cps: list[int]) -> list[dict]:
    rows = [longest(f, cp, scheme) for cp in cps
            for scheme in (SCHEMES if cp > 1 else ("one device",))]
    one = rows[0]["longest T"]
    return [{**r, "vs cp 1": r["longest T"] / one if one and r["longest T"] else None}
            for r in rows]


def work(t: int, cp: int, layout: str) -> tuple[list[int], list[int]]:
    """Per rank: the query-key pairs it scores causally (query i sees keys 0…i), and the
    score entries the ring computes: of each block, the rows and columns bounding what its
    queries see (``ring.visible``)."""
    held = [positions(t, cp, r, layout) for r in range(cp)]
    pairs = [int((mine + 1).sum()) for mine in held]
    ring = [sum(_area(visible(mine, theirs, True)) for theirs in held) for mine in held]
    return pairs, ring


def _area(seen) -> int:
    """Entries of the block part ``ring.visible`` computes (0: skipped)."""
    if seen is None:
        return 0
    rows, cols, _ = seen
    return int((rows.stop - rows.start) * (cols.stop - cols.start))


def balance_rows(t: int, cps: list[int]) -> list[dict]:
    """Busiest ÷ mean, each layout and cp. Contiguous: rank cp − 1's pairs n(T − n) + n(n + 1)/2
    with n = T/cp, over T(T + 1)/(2cp): (2T − n + 1)/(T + 1) → (2cp − 1)/cp; its ring computes
    cp blocks of the mean (cp + 1)/2: 2cp/(cp + 1) (Brandon et al. 2023, §3), the busiest all
    of T²/cp. Zig-zag: chunks j and 2cp − 1 − j hold n²(2cp − 1) + n(n + 1) pairs, n = T/2cp,
    whatever j: exactly 1; its ring computes its own (2n)² block and half of each other one,
    (2n)² + (cp − 1)·2n², so (cp + 1)/(2cp) of T²/cp, towards half."""
    rows = []
    for cp in cps:
        for layout in ("contiguous", "zigzag"):
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


def step_rows(timed: dict) -> list[dict]:
    one = timed["one device"]["median_s"]
    return [{"scheme": s, "one device ms": 1e3 * one, "cp 2 ms": 1e3 * timed[s]["median_s"],
             "speed-up": one / timed[s]["median_s"],
             "efficiency": one / timed[s]["median_s"] / TIMED} for s in SCHEMES]


def overlap_rows(steps: dict) -> list[dict]:
    """Per rank: the time its posted K, V blocks kept it waiting, less the part before the
    other rank reached its wait too, against the same blocks exchanged blocking, alone."""
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
    """One PNG: the activations a rank holds against cp per scheme beside the estimate, and
    each rank's causal work at the largest cp, contiguous against zig-zag."""
    fig, (left, right) = pyplot().subplots(1, 2, figsize=(12, 4.6))
    rows = record["activations"]
    one = [r for r in rows if r["cp"] == 1]
    for i, scheme in enumerate(SCHEMES):
        mine = one + [r for r in rows if r["scheme"] == scheme]
        cps = [r["cp"] for r in mine]
        left.plot(cps, [r["held B"] / MiB for r in mine], "o-", color=f"C{i}",
                  label=f"{scheme}, traced")
        left.plot(cps, [r["estimate B"] / MiB for r in mine], "x--", color=f"C{i}",
                  label=f"{scheme}, estimate")
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
    top = max(max(r["ring"]) for r in largest)
    right.set(xlabel="rank", ylabel="query-key pairs", ylim=(0, 1.3 * top),
              title=f"causal work per rank, cp = {cp}, T = {record['config']['balance']['seq']}")
    return [finish(fig, f"{directory}/context.png", (left, right))]


def measure(args) -> dict:
    cfg, cps = QUICK if args.quick else CONFIG, sorted({1, *args.ranks})  # cp 1: the baseline
    blocks = {cp: job(cp, f"{WORKER}:blocks", cfg, args.device) for cp in cps}
    steps = job(TIMED, f"{WORKER}:steps", cfg, args.device)
    b, f, g = cfg["block"], cfg["fits"], cfg["gpt"]
    record = {"config": cfg, "ranks": cps, "activations": activation_rows(blocks, b),
              "fits": fit_rows(f, cps), "traffic": traffic_rows(blocks, b),
              "balance": balance_rows(cfg["balance"]["seq"], cfg["balance"]["cps"]),
              "steps": step_rows(steps["timed"]), "overlap": overlap_rows(steps),
              "timed": steps["timed"], "exchange_s": steps["exchange_s"]}
    print(f"{headline('context benchmark', args)}; {cfg['layout']} layout, float32, dropout 0")
    print(table(f"1. activations per rank, one block (B {b['batch']}, T {b['seq']}, C "
                f"{b['d_model']}, {b['heads']} heads) on this rank's T/cp positions: the graph's "
                "bytes (graph_bytes) against the training command's estimate; scores B: the "
                "estimate's attention scores", record["activations"]))
    print(table(f"2. the longest sequence in {f['budget_gib']} GiB a rank, by the training "
                f"command's estimate (GPT C {f['d_model']}, {f['heads']} heads, {f['layers']} "
                f"layers, batch 1, T a multiple of {f['grid']}); bound by: the larger "
                "activations, a step's or rank 0's held-out evaluation's", record["fits"],
                formats={"need MiB": ".0f"}))
    print(table(f"3. causal balance at T = {cfg['balance']['seq']}: the busiest rank's work ÷ "
                "the mean, from the positions each rank holds; pairs: (2T − T/cp + 1)/(T + 1) "
                "→ (2cp − 1)/cp; the ring's blocks: 2cp/(cp + 1); zig-zag: 1",
                [{k: v for k, v in r.items() if k not in ("pairs", "ring")}
                 for r in record["balance"]], formats={"pairs busiest/mean": ".3f",
                                                       "formula": ".3f"}))
    print(f"   for scale, ring-flash-attention's README (8×H800, fwd + bwd): a naive causal "
          f"ring reaches {RING_FLASH[0]}% of ideal, zig-zag {RING_FLASH[1]}%; (2cp − 1)/cp at "
          f"cp = 8 bounds the naive ring at {100 * 8 / 15:.1f}%")
    print(table("4. bytes each rank sends per layer (traced at isend: every collective's "
                "messages too), against traffic.py's messages, Σ wire(cp)·count; ring and "
                "all-gather 2(cp − 1)·a ≈ 2·S·b·h·β forward, Ulysses 4(cp − 1)/cp·a ≈ "
                "4·S·b·h·β/cp; metadata: pickled exchanges, in no formula", record["traffic"]))
    print(table(f"5. a training step at cp = {TIMED} (Hybrid, Mesh(comm, cp=2)) against one "
                f"rank, same global batch: GPT T {g['seq']}, C {g['d_model']}, {g['heads']} "
                f"heads, {g['layers']} layers, batch {g['batch']}; median of {cfg['repeats']} "
                f"after {cfg['warmup']}, slowest rank", record["steps"]))
    print(table("   the ring's overlap, per step: waited = time in wait_all on K, V blocks "
                "posted a block earlier; skew = of it, before the other rank reached its own "
                "wait on them; exposed = the rest; alone = the same blocks "
                f"by blocking sendrecv ({steps['kv_bytes'] // 1024} KiB, median "
                f"{1e3 * steps['exchange_s']:.3f} ms); hidden = 1 − exposed/alone; hand-ons: "
                "dK, dV by blocking sendrecv", record["overlap"]))
    return {**record, "figures": draw_figures(args.figures, draw, record)}


BENCHMARK = Benchmark("context parallelism: activation bytes per rank and the longest sequence "
                      "against cp, causal balance, bytes per layer, a step at cp = 2",
                      "a tiny block and GPT", measure, figures="context.png",
                      ranks=Ranks((1, 2, 4), what="cp sizes",
                                  more=f"the step is timed in a job of its own at cp = {TIMED}"))
