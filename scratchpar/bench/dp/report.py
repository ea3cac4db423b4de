"""The data-parallel benchmark's rows and targets, from ``{n: a job's result}``."""

from __future__ import annotations

from itertools import groupby

from ...jobs.harness import verdict

COMM_CONFIGS = ("wide", "deep")
TARGET_RANKS = 2
EFFICIENCY_TARGET, RATIO_TARGET, DDP_TARGET = 0.90, 0.75, 1.8  # docs/data_parallel.md
BASELINE = {"bucketed": "alone", "naive": "alone", "compute-only": "alone",
            "torch-ddp": "torch-alone"}  # each contender's one-device step
CONTENDERS = ("alone", "bucketed", "naive", "compute-only", "torch-alone", "torch-ddp")


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
    """A contender's median seconds per step at n ranks; None where it did not run."""
    times = results[n]["configs"][job]["contenders"].get(contender)
    return times["median_s"] if times else None


def efficiency_of(results: dict, n: int, job: str, contender: str) -> float:
    """Weak scaling at n ranks: throughput n·b/t_n over n × one device's b/t₁, that is t₁/t_n,
    with t₁ the one-device step measured in the same job."""
    return median(results, n, job, BASELINE[contender]) / median(results, n, job, contender)


def throughput_rows(results: dict, named_jobs: dict) -> list[dict]:
    """The compute MLP per per-rank batch and contender (``named_jobs``: :func:`jobs`'s): ms
    per step and efficiency at each world size (none for a one-device row)."""
    return [{"per-rank batch": b, "contender": c, **{k: v for n in results for k, v in (
        (f"ms n={n}", 1e3 * median(results, n, job, c)),
        (f"efficiency n={n}", efficiency_of(results, n, job, c) if c in BASELINE else None))}}
        for job, (name, b) in named_jobs.items() if name == "compute"
        for c in CONTENDERS if median(results, min(results), job, c) is not None]


def focus_rows(results: dict, configs: dict) -> tuple[list[dict], list[dict]]:
    """Per focus job and world size: naive, bucketed and compute-only ms per step and each DP's
    exposed fraction; and, where DDP ran, both throughputs and the first steps' largest loss
    difference."""
    steps, ddp = [], []
    for job in focus(configs):
        b = jobs(configs)[job][1]
        for n in results:
            naive, bucketed, compute = (1e3 * median(results, n, job, c)
                                        for c in ("naive", "bucketed", "compute-only"))
            steps.append({"MLP": job, "n": n, "naive ms": naive, "bucketed ms": bucketed,
                          "bucketed/naive": bucketed / naive, "compute-only ms": compute,
                          "exposed naive": exposed_fraction(naive, compute),
                          "exposed bucketed": exposed_fraction(bucketed, compute)})
            check = results[n]["configs"][job]["loss_check"]
            if check is not None:
                theirs = 1e3 * median(results, n, job, "torch-ddp")
                ddp.append({"MLP": job, "n": n, "scratchpar samples/s": 1e3 * n * b / bucketed,
                            "ddp samples/s": 1e3 * n * b / theirs,
                            "scratchpar/ddp": theirs / bucketed,
                            "loss abs err": f"{max(e['abs_err'] for e in check):.1e}"})
    return steps, ddp


def targets(results: dict, configs: dict, steps: list[dict], ddp: list[dict],
            device: str) -> list[dict]:
    """The three targets at ``TARGET_RANKS`` ranks: one row per MLP they apply to."""
    at, target = TARGET_RANKS, f"compute@{configs['compute']['target']}"
    ratio = {r["MLP"]: r["bucketed/naive"] for r in steps if r["n"] == at}
    speedup = {r["MLP"]: r["scratchpar/ddp"] for r in ddp if r["n"] == at}
    torch = "n/a" if ddp else "n/a (torch missing)"

    def row(what: str, measured, goal: float, higher: bool, missing: str = "n/a") -> dict:
        return {"target": what, "measured": measured, "n": at,
                "verdict": verdict(device, met(measured, goal, higher), missing)}

    eff = efficiency_of(results, at, target, "bucketed") if at in results else None
    return ([row(f"scaling efficiency, bucketed, {target} ≥ {EFFICIENCY_TARGET}", eff,
                 EFFICIENCY_TARGET, True)]
            + [row(f"bucketed / naive step time, {job} ≤ {RATIO_TARGET}", ratio.get(job),
                   RATIO_TARGET, False) for job in COMM_CONFIGS]
            + [row(f"scratchpar / torch DDP throughput, {job} ≥ {DDP_TARGET}", speedup.get(job),
                   DDP_TARGET, True, torch) for job in focus(configs)])


def layers(sizes: list[int]) -> str:
    """784-1024-10, or 64×33-10 for a run of equal widths."""
    runs = [list(run) for _, run in groupby(sizes)]
    return "-".join(f"{run[0]}×{len(run)}" if len(run) >= 3 else "-".join(map(str, run))
                    for run in runs)
