"""The data-parallel benchmark's rows and targets, from ``{n: a job's result}``."""

from __future__ import annotations

from ..harness import judged

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


def verdict(measured: float | None, target: float, higher_is_better: bool) -> str:
    if measured is None:
        return "n/a"
    return "PASS" if (measured >= target if higher_is_better else measured <= target) else "MISS"


def median(results: dict, n: int, job: str, contender: str) -> float | None:
    times = results[n]["configs"][job]["contenders"].get(contender)
    return times["median_s"] if times else None


def efficiency_of(results: dict, n: int, job: str, contender: str) -> float:
    """Weak scaling at n ranks: throughput n·b/t_n over n × one device's b/t₁, that is t₁/t_n,
    with t₁ the one-device step measured in the same job."""
    return median(results, n, job, BASELINE[contender]) / median(results, n, job, contender)


def throughput_rows(results: dict, configs: dict) -> list[list]:
    """Compute-bound MLP, weak scaling, one row per per-rank batch and contender: its ms per
    step and efficiency at each world size (one device's rows: its ms, no efficiency)."""
    rows = []
    for job, (name, b) in jobs(configs).items():
        if name != "compute":
            continue
        for contender in ("alone", "bucketed", "naive", "compute-only", "torch-alone",
                          "torch-ddp"):
            if median(results, min(results), job, contender) is None:
                continue
            row = [b, contender]
            for n in results:
                row += [1e3 * median(results, n, job, contender),
                        efficiency_of(results, n, job, contender) if contender in BASELINE
                        else None]
            rows.append(row)
    return rows


def throughput_headers(results: dict) -> list[str]:
    return ["per-rank batch", "contender"] + [
        h for n in results for h in (f"ms n={n}", f"efficiency n={n}")]


def ratio_rows(results: dict, configs: dict) -> list[list]:
    return [[job, n, 1e3 * median(results, n, job, "naive"),
             1e3 * median(results, n, job, "bucketed"),
             median(results, n, job, "bucketed") / median(results, n, job, "naive")]
            for job in focus(configs) for n in results]


def fraction_rows(results: dict, configs: dict) -> list[list]:
    rows = []
    for job in focus(configs):
        for n in results:
            compute = median(results, n, job, "compute-only")
            for name in ("bucketed", "naive"):
                t = median(results, n, job, name)
                rows.append([job, n, name, 1e3 * t, 1e3 * compute, exposed_fraction(t, compute)])
    return rows


def ddp_rows(results: dict, configs: dict) -> list[list]:
    rows, per_rank = [], {job: b for job, (_, b) in jobs(configs).items()}
    for job in focus(configs):
        for n in results:
            check = results[n]["configs"][job]["loss_check"]
            if check is None:
                continue
            ours, theirs = median(results, n, job, "bucketed"), median(results, n, job,
                                                                       "torch-ddp")
            rows.append([job, n, n * per_rank[job] / ours, n * per_rank[job] / theirs,
                         theirs / ours, f"{max(e['abs_err'] for e in check):.1e}"])
    return rows


def targets(results: dict, configs: dict, ddp: list, device: str) -> list[list]:
    """The three targets at ``TARGET_RANKS`` ranks: one row per MLP they apply to."""
    at, target = TARGET_RANKS, f"compute@{configs['compute']['target']}"
    eff = efficiency_of(results, at, target, "bucketed") if at in results else None
    rows = [[f"scaling efficiency, bucketed, {target} ≥ {EFFICIENCY_TARGET}", eff, at,
             judged(device, verdict(eff, EFFICIENCY_TARGET, True))]]
    for job in COMM_CONFIGS:
        ratio = None if at not in results else \
            median(results, at, job, "bucketed") / median(results, at, job, "naive")
        rows.append([f"bucketed / naive step time, {job} ≤ {RATIO_TARGET}", ratio, at,
                     judged(device, verdict(ratio, RATIO_TARGET, False))])
    for job in focus(configs):
        speedup = next((r[4] for r in ddp if r[0] == job and r[1] == at), None)
        rows.append([f"scratchpar / torch DDP throughput, {job} ≥ {DDP_TARGET}", speedup, at,
                     judged(device, verdict(speedup, DDP_TARGET, True)) if ddp
                     else "n/a (torch missing)"])
    return rows


def layers(sizes: list[int]) -> str:
    """784-1024-10, or 64×33-10 for a run of equal widths."""
    parts, i = [], 0
    while i < len(sizes):
        j = i
        while j + 1 < len(sizes) and sizes[j + 1] == sizes[i]:
            j += 1
        run = sizes[i:j + 1]
        parts.append(f"{sizes[i]}×{len(run)}" if len(run) >= 3 else "-".join(map(str, run)))
        i = j + 1
    return "-".join(parts)
