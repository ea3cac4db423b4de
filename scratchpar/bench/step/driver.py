"""The step benchmark's driver: equivalence first, then the steps and the autograd's overhead."""

from __future__ import annotations

import os

import numpy as np

from ... import backend
from ...allocator import keep_freed_memory
from ..harness import Benchmark, describe, judged
from ..table import format_table
from ..timing import interleaved
from .cases import Case, gpt_case, mlp_case, torch_twins
from .overhead import overhead_rows

LOSS_RTOL, GRAD_RTOL = 1e-4, 1e-3
TARGETS = {"cpu": [("mlp", "pytorch", 0.85), ("mlp", "floor", 1.10), ("gpt", "pytorch", 1.20)],
           "cuda": [("mlp", "pytorch", 1.30), ("gpt", "pytorch", 1.30)]}  # docs/devices.md
TARGETS["double"] = TARGETS["cuda"]  # the GPU path's rows, with no verdict: no real timing


class NotEquivalent(AssertionError):
    """Two contenders disagree: timing them against each other would mean nothing."""


def add_arguments(parser) -> None:
    parser.add_argument("--repeats", type=int, default=50, help="timed steps per contender")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps per contender first")
    parser.add_argument("--default-malloc", action="store_true",
                        help="leave glibc's heap trimming as it is (see scratchpar/allocator.py)")


def compare(case: Case) -> list[dict]:
    """Each contender's loss and worst gradient error against the first one, compared on the
    host; raise if off."""
    results = [(c.name, *c.loss_and_grads()) for c in case.contenders]
    _, ref_loss, ref_grads = results[0]
    rows = []
    for name, loss, grads in results:
        errors = {k: float(np.linalg.norm(grads[k] - g) / max(np.linalg.norm(g), 1e-30))
                  for k, g in ref_grads.items()}
        worst = max(errors, key=errors.get)
        rows.append({"case": case.name, "contender": name, "loss": loss,
                     "loss_rel_err": abs(loss - ref_loss) / abs(ref_loss),
                     "grad_rel_err": errors[worst], "worst_grad": worst})
        if rows[-1]["loss_rel_err"] > LOSS_RTOL or errors[worst] > GRAD_RTOL:
            raise NotEquivalent(f"{case.name}: {name} disagrees with {results[0][0]}: {rows[-1]}")
    return rows


def time_case(case: Case, repeats: int, warmup: int) -> dict[str, dict]:
    """Median ms and minor page faults per step of each contender, timed in turns."""
    samples = interleaved({c.name: c.step for c in case.contenders}, repeats, warmup)  # synced
    return {name: {"ms": s.median_ms(), "faults": s.median_faults()}
            for name, s in samples.items()}


def verdicts(timings: dict, device: str) -> list[dict]:
    rows = []
    for case, baseline, limit in TARGETS[device]:
        ms = {name: t["ms"] for name, t in timings[case].items()}
        ratio = ms["scratchpar"] / ms[baseline] if baseline in ms else None
        verdict = "n/a (no torch)" if ratio is None else \
            judged(device, "PASS" if ratio <= limit else "MISS")
        rows.append({"target": f"{case}: scratchpar <= {limit:.2f}x {baseline}", "ratio": ratio,
                     "verdict": verdict})
    return rows


def timing_rows(timings: dict) -> list[list]:
    rows = []
    for case, contenders in timings.items():
        ms = {name: t["ms"] for name, t in contenders.items()}
        for name, t in contenders.items():
            rows.append([case, name, t["ms"], ms[name] / ms["pytorch"] if "pytorch" in ms else None,
                         ms[name] / ms["floor"] if "floor" in ms else None, int(t["faults"])])
    return rows


def versions(twins, device: str) -> str:
    """The libraries timed, and where PyTorch runs."""
    text = f"numpy {np.__version__}"
    if device == "cuda":
        import cupy

        text += f", cupy {cupy.__version__}"
    if twins is None:
        return text + ", torch missing: PyTorch rows and targets skipped"
    where = twins.device_for(device)
    threads = f"{twins.torch.get_num_threads()} CPU thread(s)"
    return text + f", torch {twins.torch.__version__} on {where.type} ({threads})"


def measure(args) -> dict:
    repeats, warmup = (3, 1) if args.quick else (args.repeats, args.warmup)
    backend.set_device(args.device)
    twins = torch_twins()
    libraries = versions(twins, args.device)
    threads = ", ".join(f"{v}={os.environ.get(v, 'unset')}" for v in
                        ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"))
    malloc = "malloc: glibc defaults" if args.default_malloc else keep_freed_memory()
    print(f"step benchmark on {describe(args.device)}\n{libraries}; {threads}\n"
          f"{malloc} (all contenders)")
    print(f"median of {repeats} steps per contender, taken in turns after {warmup} warm-up steps"
          + ("" if args.device == "cpu" else ", each ending with a wait for its device"))
    cases = [mlp_case(args.device), gpt_case(args.device)]
    for case in cases:
        print(f"  {case.name}: {case.description}")

    equivalence = [row for case in cases for row in compare(case)]
    print("\nequivalence: one forward+backward from identical weights, before timing: OK")
    print(format_table(["case", "contender", "loss", "loss rel err", "worst grad rel err"],
                       [[r["case"], r["contender"], f"{r['loss']:.6f}", f"{r['loss_rel_err']:.1e}",
                         f"{r['grad_rel_err']:.1e} ({r['worst_grad']})"] for r in equivalence]))

    timings = {case.name: time_case(case, repeats, warmup) for case in cases}
    print("\n" + format_table(["case", "contender", "ms/step", "x pytorch", "x floor",
                               "page faults/step"], timing_rows(timings)))
    targets = verdicts(timings, args.device)
    print("\n" + format_table(["target", "measured", "verdict"],
                              [[t["target"], t["ratio"], t["verdict"]] for t in targets]))

    calls = 20 if args.quick else 2000
    overhead = overhead_rows(calls, 3 if args.quick else 15, with_torch=twins is not None)
    print(f"\nautograd overhead per op: forward+backward on {overhead[0]['shape']} float32 host "
          "arrays (whatever the device), minus bare NumPy doing the same math (µs)")
    print(format_table(["op", "numpy", "scratchpar", "overhead", "pytorch overhead"],
                       [[r["op"], r["numpy_us"], r["scratchpar_us"], r["overhead_us"],
                         r["torch_overhead_us"]] for r in overhead]))
    return {"repeats": repeats, "warmup": warmup, "versions": libraries, "malloc": malloc,
            "cases": {c.name: c.description for c in cases}, "equivalence": equivalence,
            "per_step": timings, "targets": targets, "overhead_us": overhead}


BENCHMARK = Benchmark("one training step against PyTorch eager and a NumPy floor, from the "
                      "same weights after an equivalence check", "a few repeats only", measure,
                      add_arguments)
