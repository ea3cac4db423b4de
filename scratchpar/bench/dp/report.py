"""The data-parallel benchmark's rows and targets, from ``{n: a job's result}``."""

from __future__ import annotations

from itertools import groupby

from ...jobs.harness import verdict

COMM_CONFIGS = ("wide", "deep")
TARGET_RANKS = 2
EFFICIENCY_TARGET, RATIO_TARGET, DDP_TARGET = 0.90, 0.75, 1.8  # docs/data_parallel.md
BASELINE = {"bucketed": "alone", "naive": "alone", "compute-only": "alone",
            "torch-ddp": "torch-alone"}  # each contender's one-device step


def jobs(configs: dict) -> dict[str, tuple[str, int]]:
    """Job name → (config, per-rank batch): "compute@128", or plain "wide" for a single batch."""
    return {(f"{name}@{b}" if len(c["per_rank"]) > 1 else name): (name, b)
            for name, c in configs.items() for b in c["per_rank"]}


def focus(configs: dict) -> list[str]:
    """The jobs the ratio, exposure and DDP tables show: the compute target and the comm MLPs."""
    target = configs["compute"]["target"]
    return [job for job, (name, b) in jobs(configs).items()
            if name in COMM_CONFIGS or (name == "compute" and b == target)]


def exposed_fraction(step_s: float, compute_s: float) -> float:
    """(DP step − compute-only step) / DP step: the share of a step spent waiting on others."""
    return (step_s - compute_s) / step_s


def met(measured: float | None, goal: float, higher_is_better: bool) -> bool | None:
    """Whether ``measured`` reached ``goal`` in its direction; None where nothing was measured."""
    if measured is None:
        return None
    return measured >= goal if higher_is_better else measured <= goal


def median(results: dict, n: int, job: str, contender: str) -> float | None:
    times = results[n]["configs"][job]["contenders"].get(contender)
    return times["median_s"] if times else None


def efficiency_of(results: dict, n: int, job: str, contender: str) -> float:
    """Weak scaling at n ranks: throughput n·b/t_n over n × one device's b/t₁, that is t₁/t_n,
    with t₁ the one-device step measured in the same job."""
    return median(results, n, job, BASELINE[contender]) / median(results, n, job, contender)


def throughput_rows(results: dict, configs: dict) -> list[dict]:
    """The compute MLP per per-rank batch and contender: ms per step and efficiency at each
    world size (none for a one-device row)."""
    return [{"batch": b, "contender": c, **{k: v for n in results for k, v in (
        (f"ms_{n}", 1e3 * median(results, n, job, c)),
        (f"efficiency_{n}", efficiency_of(results, n, job, c) if c in BASELINE else None))}}
        for job, (name, b) in jobs(configs).items() if name == "compute"
        for c in ("alone", "bucketed", "naive", "compute-only", "torch-alone", "torch-ddp")
        if median(results, min(results), job, c) is not None]


def focus_rows(results: dict, configs: dict) -> list[dict]:
    """Per focus job and world size: naive, bucketed and compute-only ms per step, the exposed
    fractions and, with DDP, both throughputs and the first steps' largest loss difference."""
    rows = []
    for job in focus(configs):
        b = jobs(configs)[job][1]
        for n in results:
            ms = {c: 1e3 * t for c in ("naive", "bucketed", "compute-only", "torch-ddp")
                  if (t := median(results, n, job, c)) is not None}
            check = results[n]["configs"][job]["loss_check"]
            rows.append({"job": job, "n": n, "ms": ms, "ratio": ms["bucketed"] / ms["naive"],
                         **{f"exposed_{c}": exposed_fraction(ms[c], ms["compute-only"])
                            for c in ("bucketed", "naive")},
                         "ddp": None if check is None else {
                             "ours": 1e3 * n * b / ms["bucketed"],
                             "theirs": 1e3 * n * b / ms["torch-ddp"],
                             "speedup": ms["torch-ddp"] / ms["bucketed"],
                             "loss_err": f"{max(e['abs_err'] for e in check):.1e}"}})
    return rows


def targets(results: dict, configs: dict, rows: list[dict], device: str) -> list[dict]:
    """The three targets at ``TARGET_RANKS`` ranks: one row per MLP they apply to."""
    at, target = TARGET_RANKS, f"compute@{configs['compute']['target']}"
    mine, ddp = {r["job"]: r for r in rows if r["n"] == at}, any(r["ddp"] for r in rows)

    def row(what: str, measured, goal: float, higher: bool, torch: bool = True) -> dict:
        return {"target": what, "measured": measured, "n": at, "verdict": verdict(
            device, met(measured, goal, higher)) if torch else "n/a (torch missing)"}

    eff = efficiency_of(results, at, target, "bucketed") if at in results else None
    return ([row(f"scaling efficiency, bucketed, {target} ≥ {EFFICIENCY_TARGET}", eff,
                 EFFICIENCY_TARGET, True)]
            + [row(f"bucketed / naive step time, {job} ≤ {RATIO_TARGET}",
                   mine[job]["ratio"] if job in mine else None, RATIO_TARGET, False)
               for job in COMM_CONFIGS]
            + [row(f"scratchpar / torch DDP throughput, {job} ≥ {DDP_TARGET}",
                   (mine.get(job, {}).get("ddp") or {}).get("speedup"), DDP_TARGET, True, ddp)
               for job in focus(configs)])


def layers(sizes: list[int]) -> str:
    """784-1024-10, or 64×33-10 for a run of equal widths."""
    runs = [list(run) for _, run in groupby(sizes)]
    return "-".join(f"{run[0]}×{len(run)}" if len(run) >= 3 else "-".join(map(str, run))
                    for run in runs)
