"""The data-parallel benchmark: a job per world size and round, then its rows and targets."""

from __future__ import annotations

import importlib.util
import statistics
import tempfile

from ...jobs import mpijob
from ...jobs.harness import Benchmark, Ranks, describe, judge, machine, staging
from ...table import table

CONFIGS = {"compute": {"sizes": [256, 512, 512, 10], "per_rank": [32, 64, 128, 256, 512],
                       "target": 128},
           "wide": {"sizes": [1024, 2048, 2048, 10], "per_rank": [4]},
           "deep": {"sizes": [64] * 33 + [10], "per_rank": [16]}}
QUICK_CONFIGS = {"compute": {"sizes": [32, 64, 64, 10], "per_rank": [4, 8], "target": 8},
                 "wide": {"sizes": [64, 256, 256, 10], "per_rank": [2]},
                 "deep": {"sizes": [8] * 6 + [4], "per_rank": [2]}}
TIMING, QUICK_TIMING = {"repeats": 20, "warmup": 3}, {"repeats": 3, "warmup": 1}
JOB_ENV = {"GLOO_SOCKET_IFNAME": "lo"}  # gloo's connections between ranks stay on loopback
TARGET_RANKS = 2
EFFICIENCY_TARGET, RATIO_TARGET, DDP_TARGET = 0.90, 0.75, 1.8  # docs/data_parallel.md
BASELINE = {"bucketed": "alone", "naive": "alone", "compute-only": "alone",
            "torch-ddp": "torch-alone"}  # each contender's one-device step
CONTENDERS = ("alone", "bucketed", "naive", "compute-only", "torch-alone", "torch-ddp")


def torch_available() -> bool:
    """Whether PyTorch is installed: DDP runs beside scratchpar's DP only then."""
    return importlib.util.find_spec("torch") is not None


def pool(rounds: list[dict]) -> dict:
    """One result per world size from several rounds: each contender's samples pooled, the
    median taken over all of them; the loss check is the first round's."""
    merged = rounds[0]
    for n, result in merged.items():
        for job, timed in result["configs"].items():
            for name, times in timed["contenders"].items():
                samples = [s for r in rounds
                           for s in r[n]["configs"][job]["contenders"][name]["samples_s"]]
                times.update(samples_s=samples, median_s=float(statistics.median(samples)))
    return merged


def jobs(configs: dict) -> dict[str, tuple[str, int]]:
    """Job name → (config, per-rank batch): "compute@128", or plain "wide" for a single batch."""
    return {(f"{name}@{b}" if len(c["per_rank"]) > 1 else name): (name, b)
            for name, c in configs.items() for b in c["per_rank"]}


def focus(configs: dict) -> list[str]:
    """The jobs the ratio, exposure and DDP tables show: the compute target and the comm MLPs."""
    return [f"compute@{configs['compute']['target']}", "wide", "deep"]


def exposed_fraction(step_s: float, compute_s: float) -> float:
    """(DP step − compute-only step) / DP step: the share of a step spent waiting on others."""
    return (step_s - compute_s) / step_s


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
    """Per focus job and world size: naive's and bucketed's ms per step, and their exposed
    fractions; and, where DDP ran, both throughputs and the first steps' largest loss gap."""
    steps, ddp = [], []
    for job in focus(configs):
        b = jobs(configs)[job][1]
        for n in results:
            naive, bucketed, compute = (1e3 * median(results, n, job, c)
                                        for c in ("naive", "bucketed", "compute-only"))
            steps.append({"MLP": job, "n": n, "naive ms": naive, "bucketed ms": bucketed,
                          "bucketed/naive": bucketed / naive,
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
    at, target = TARGET_RANKS, focus(configs)[0]
    ratio = {r["MLP"]: r["bucketed/naive"] for r in steps if r["n"] == at}
    speedup = {r["MLP"]: r["scratchpar/ddp"] for r in ddp if r["n"] == at}

    def row(what: str, measured, missing: str = "n/a", **goal) -> dict:
        return {"target": what, "measured": measured, "n": at,
                "verdict": judge(device, measured, missing=missing, **goal)}

    eff = efficiency_of(results, at, target, "bucketed") if at in results else None
    return ([row(f"scaling efficiency, bucketed, {target} ≥ {EFFICIENCY_TARGET}", eff,
                 at_least=EFFICIENCY_TARGET)]
            + [row(f"bucketed / naive step time, {job} ≤ {RATIO_TARGET}", ratio.get(job),
                   at_most=RATIO_TARGET) for job in ("wide", "deep")]
            + [row(f"scratchpar / torch DDP throughput, {job} ≥ {DDP_TARGET}", speedup.get(job),
                   "n/a" if ddp else "n/a (torch missing)", at_least=DDP_TARGET)
               for job in focus(configs)])


def measure(args) -> dict:
    configs, timing = (QUICK_CONFIGS, QUICK_TIMING) if args.quick else (CONFIGS, TIMING)
    rounds, ddp = 1 if args.quick else args.rounds, torch_available()
    if rounds < 1:
        raise SystemExit(f"--rounds must be positive, got {rounds}")
    print(f"dp benchmark on {describe(args.device)}: float32 MLPs, SGD, weak scaling at world "
          f"sizes {args.ranks}; median of {rounds} × {timing['repeats']} steps per contender, "
          "in turns; time = slowest rank" + ("" if ddp else "; torch missing: no DDP"))
    with tempfile.TemporaryDirectory(prefix="scratchpar-ddp-") as rendezvous:
        def world(n: int, r: int) -> dict:
            specs = {name: {"sizes": configs[config]["sizes"], "batch": n * b}
                     for name, (config, b) in jobs(configs).items()}
            return mpijob.job(n, "scratchpar.bench.dp.worker:measure_ranks", {
                "configs": specs, **timing,
                "ddp_file": f"{rendezvous}/n{n}-round{r}" if ddp else None}, args.device, JOB_ENV)

        results = pool([{n: world(n, r) for n in args.ranks} for r in range(rounds)])
    print(f"buffers: {staging(args.device, results[args.ranks[0]]['cuda_aware'])}\n"
          f"{machine(args)}")
    print(table("throughput, compute MLP, weak scaling: efficiency t₁/t_n (docs/data_parallel.md, "
                "Measured)", throughput_rows(results, jobs(configs))))
    steps, ddp = focus_rows(results, configs)
    print(table("bucketed against naive, and the exposed communication = (DP step − compute-only "
                "step) / DP step", steps))
    if ddp:
        backends = ", ".join(f"{results[n]['ddp_backend']} at N={n}" for n in results)
        print(table(f"scratchpar (bucketed) against torch DDP ({backends}), the first steps' "
                    "losses checked first", ddp))
    verdicts = targets(results, configs, steps, ddp, args.device)
    print(table("targets (docs/data_parallel.md, Measured)", verdicts))
    return {"configs": configs, "jobs": jobs(configs), "rounds": rounds, **timing,
            "per_world_size": {str(n): r for n, r in results.items()}, "targets": verdicts}


BENCHMARK = Benchmark(
    "data parallelism: scaling against one rank, bucketed against naive, exposed communication, "
    "torch DDP", "tiny MLPs, 3 repeats", measure, lambda parser: parser.add_argument(
        "--rounds", type=int, default=2, help="run the world sizes this many times in turn, "
        "pooling the samples (load that comes and goes then weighs on every world size)"),
    ranks=Ranks((2, 4), (2,), more="each job also times one device, rank 0 alone"))
