"""The ZeRO benchmark's rows: bytes held against the formula, step times, offload's split."""

from __future__ import annotations

from ...parallel.zero.formula import formula

CONTENDERS = ("dp", "zero1", "zero2", "zero3", "zero1-offload", "zero2-offload", "zero3-offload")


def stage_of(name: str) -> tuple[int, bool]:
    """A contender's ZeRO stage (DP: 0) and whether it offloads: "zero2-offload" → (2, True)."""
    return (0 if name == "dp" else int(name[4]), name.endswith("-offload"))


FORMULA_PARTS = ("parameters", "gradients", "optimizer", "host")
SHORT = dict(zip(FORMULA_PARTS, ("params", "grads", "optim", "host")))
NAMED = {"buckets": ("buckets",), "gathered": ("gathered",),
         "scratch": ("scratch", "host scratch")}  # column → the ledger's parts it sums
LABELS = {name: ("DP" if stage == 0 else f"ZeRO-{stage}") + (" offload" if off else "")
          for name in CONTENDERS for stage, off in [stage_of(name)]}
KiB, MiB = 1 << 10, 1 << 20
TARGET = 1.5  # docs/zero.md: ZeRO-3's step ≤ TARGET × DP's
TARGET_RANKS = 2
OFFLOAD_COLUMNS = {"N": "ranks", "contender": "label", "ms/step": "step_ms",
                   "rank 0 ms": "own_ms", "forward": "forward_ms",
                   "backward + comm": "rest_ms", "copies": "copy_ms", "update": "update_ms",
                   "copies %": "copy_pct"}
FITS_COLUMNS = {"contender": "label", "d_model": "d_model", "Ψ (M)": "params_m",
                "at the cap": "capped", "tried": "tried"}


def unit(psi: int, itemsize: int) -> tuple[str, int]:
    """MiB for a model of 4 MiB or more, else KiB (a tiny model's parts would all read 0.00)."""
    return ("MiB", MiB) if psi * itemsize >= 4 * MiB else ("KiB", KiB)


def memory_rows(results: dict, model: str) -> list[dict]:
    """Per world size and contender, rank 0's peaks in bytes (it holds the larger chunks): each
    part the formula names beside the formula's, the ratio of their sums, the named buffers
    beyond the formula and the activations."""
    rows = []
    for n, res in results.items():
        mem = res["memory"][model]
        for name in CONTENDERS:
            held = mem["ranks"][name][0]
            want = formula(stage_of(name)[0], mem["psi"], n, mem["itemsize"], mem["moments"],
                           stage_of(name)[1])
            row = {"ranks": n, "contender": name, "label": LABELS[name],
                   "largest_group": held["largest_group"], "activations": held["activations"],
                   "total_at_peak": held["total"],
                   **{p: held["peak"].get(p, 0) for p in FORMULA_PARTS},
                   **{f"formula_{p}": round(want.get(p, 0.0)) for p in FORMULA_PARTS},
                   **{c: sum(held["peak"].get(p, 0) for p in parts) for c, parts in NAMED.items()}}
            row["ratio"] = sum(row[p] for p in FORMULA_PARTS) / sum(
                row[f"formula_{p}"] for p in FORMULA_PARTS)
            rows.append(row)
    return rows


def memory_columns(scale: int) -> dict:
    """The memory table's columns, every byte count in ``scale`` units."""
    def scaled(key):
        return lambda row: row[key] / scale

    return {"N": "ranks", "contender": "label",
            **{SHORT[p]: scaled(p) for p in FORMULA_PARTS},
            **{f"f.{SHORT[p]}": scaled(f"formula_{p}") for p in FORMULA_PARTS},
            "measured/formula": "ratio", **{c: scaled(c) for c in (*NAMED, "activations")}}


def step_ms(res: dict, name: str) -> float:
    return 1e3 * res["timing"]["timed"][name]["median_s"]


def timing_rows(results: dict) -> list[dict]:
    """Per contender, its median step at each world size and its ratio to DP's."""
    return [{"contender": name, "label": LABELS[name],
             **{k: v for n, res in results.items() for k, v in (
                 (f"ms_{n}", step_ms(res, name)),
                 (f"vs_dp_{n}", step_ms(res, name) / step_ms(res, "dp")))}}
            for name in CONTENDERS]


def timing_columns(ranks: list[int]) -> dict[str, str]:
    return {"contender": "label", **{h: k for n in ranks for h, k in (
        (f"ms/step N={n}", f"ms_{n}"), (f"× DP N={n}", f"vs_dp_{n}"))}}


def target(results: dict) -> dict | None:
    """ZeRO-3's step over DP's at TARGET_RANKS ranks (or the smallest world timed)."""
    if not results:
        return None
    n = TARGET_RANKS if TARGET_RANKS in results else min(results)
    ratio = step_ms(results[n], "zero3") / step_ms(results[n], "dp")
    return {"ranks": n, "ratio": ratio, "target": TARGET,
            "verdict": "PASS" if ratio <= TARGET else "MISS"}


def offload_rows(results: dict) -> list[dict]:
    """Per world size and stage, with and without offload: the step (slowest rank's median),
    rank 0's medians of forward, copies and update, and the rest of its step."""
    rows = []
    for n, res in results.items():
        for name in (f"zero{s}{o}" for s in (1, 2, 3) for o in ("", "-offload")):
            ms = {k.removesuffix("_s"): 1e3 * v for k, v in res["timing"]["split"][name].items()}
            rows.append({"ranks": n, "stage": stage_of(name)[0], "contender": name,
                         "label": LABELS[name], "step_ms": step_ms(res, name),
                         "own_ms": ms["total"], "forward_ms": ms["forward"],
                         "rest_ms": ms["total"] - ms["forward"] - ms["copy"] - ms["update"],
                         "copy_ms": ms["copy"], "update_ms": ms["update"],
                         "copy_pct": 100 * ms["copy"] / ms["total"]})
    return rows


def fits_rows(fits: dict) -> list[dict]:
    """Per contender, the widest GPT that trained within the budget, and what was tried."""
    return [{"contender": name, "label": LABELS[name], "d_model": got["d_model"],
             "params_m": got["params"] / 1e6 if got["params"] else None,
             "capped": got["capped"],
             "tried": " ".join(f"{d}{'✓' if ok else '✗'}" for d, ok in got["tried"])}
            for name in CONTENDERS if (got := fits["largest"].get(name)) is not None]
