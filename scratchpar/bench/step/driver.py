"""The step benchmark: equivalence first, then the steps, then the autograd's cost per op."""

from __future__ import annotations

import os

import numpy as np

from ... import backend
from ...allocator import keep_freed_memory
from ...autograd import Tensor
from ...autograd import functional as F
from ..harness import Benchmark, describe, judged
from ..table import table
from ..timing import Timed, interleaved, on_host
from .cases import Case, gpt_case, mlp_case, torch_twins

LOSS_RTOL, GRAD_RTOL = 1e-4, 1e-3
TARGETS = {"cpu": [("mlp", "pytorch", 0.85), ("mlp", "floor", 1.10), ("gpt", "pytorch", 1.20)],
           "cuda": [("mlp", "pytorch", 1.30), ("gpt", "pytorch", 1.30)]}  # docs/devices.md
TARGETS["double"] = TARGETS["cuda"]  # the GPU path's rows, with no verdict: no real timing
SHAPE = (8, 8)  # of the overhead's operands
OPS = {  # op → (the autograd op on Tensors a, b; bare NumPy's forward and backward of it)
    "add": (F.add, lambda a, b, g: a + b),
    "mul": (F.mul, lambda a, b, g: (a * b, g * b, g * a)),
    "matmul": (F.matmul, lambda a, b, g: (a @ b, g @ b.T, a.T @ g)),
    "relu": (lambda a, b: F.relu(a), lambda a, b, g: _masked(a > 0, a, g)),
    "sum": (lambda a, b: F.sum(a), lambda a, b, g: (a.sum(), np.broadcast_to(g, a.shape))),
    "reshape": (lambda a, b: F.reshape(a, -1), lambda a, b, g: (a.reshape(-1), g.reshape(a.shape))),
}


class NotEquivalent(AssertionError):
    """Two contenders disagree: timing them against each other would mean nothing."""


def add_arguments(parser) -> None:
    parser.add_argument("--repeats", type=int, default=50, help="timed steps per contender")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps per contender first")
    parser.add_argument("--default-malloc", action="store_true",
                        help="leave glibc's heap trimming as it is (see scratchpar/allocator.py)")


def compare(case: Case) -> list[dict]:
    """Each contender's loss and worst gradient error against the first one's, on the host;
    raise if off."""
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


def overhead_rows(calls: int, repeats: int, with_torch: bool) -> list[dict]:
    """Per op: µs per forward+backward for NumPy, scratchpar and PyTorch, on host arrays
    whatever the device: the Python cost of a graph node (a GPU adds CuPy's launch latency)."""
    gen = np.random.default_rng(0)
    a, b = (gen.standard_normal(SHAPE).astype(np.float32) for _ in range(2))
    rows = []
    for name, (op, bare) in OPS.items():
        ta, tb = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
        g_out = np.ones_like(op(ta, tb).data)
        runners = {"numpy": lambda bare=bare, g=g_out: bare(a, b, g),
                   "scratchpar": graph(op, ta, tb, g_out)}
        if with_torch:
            import torch

            ops = {"relu": lambda x, y: torch.relu(x), "sum": lambda x, y: x.sum(),
                   "reshape": lambda x, y: x.reshape(-1)}
            pa, pb = (torch.from_numpy(v.copy()).requires_grad_() for v in (a, b))
            runners["torch"] = graph(ops.get(name, getattr(torch, name)), pa, pb,
                                     torch.from_numpy(np.asarray(g_out)))
        samples = interleaved({k: Timed(repeated(fn, calls), on_host)
                               for k, fn in runners.items()}, repeats, 1)
        us = {k: 1e3 * s.median_ms() / calls for k, s in samples.items()}
        rows.append({"op": name, "shape": SHAPE, "numpy_us": us["numpy"],
                     "scratchpar_us": us["scratchpar"],
                     "overhead_us": us["scratchpar"] - us["numpy"],
                     "torch_overhead_us": us["torch"] - us["numpy"] if with_torch else None})
    return rows


def _masked(mask, a, g):
    return a * mask, g * mask


def repeated(fn, calls: int):
    """``fn`` called ``calls`` times in a row: one timed turn for a tiny operation."""

    def run():
        for _ in range(calls):
            fn()

    return run


def graph(op, a, b, g_out):
    """The one-op graph of ``op`` built and run backward, from fresh leaves each time."""

    def run():
        a.grad = b.grad = None
        op(a, b).backward(g_out)

    return run


def versions(twins, device: str) -> str:
    """The libraries timed, and where PyTorch runs."""
    text = f"numpy {np.__version__}"
    if device == "cuda":
        import cupy

        text += f", cupy {cupy.__version__}"
    if twins is None:
        return text + ", torch missing: PyTorch rows and targets skipped"
    where, threads = twins.device_for(device).type, twins.torch.get_num_threads()
    return text + f", torch {twins.torch.__version__} on {where} ({threads} CPU thread(s))"


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
    print(table("equivalence: one forward+backward from identical weights, before timing: OK",
                equivalence, {"case": "case", "contender": "contender", "loss": "{loss:.6f}",
                              "loss rel err": "{loss_rel_err:.1e}",
                              "worst grad rel err": "{grad_rel_err:.1e} ({worst_grad})"}))
    timings = {case.name: time_case(case, repeats, warmup) for case in cases}
    rows = [{"case": case, "contender": name, **t, "of": {k: v["ms"] for k, v in ts.items()}}
            for case, ts in timings.items() for name, t in ts.items()]
    print(table("ms per step", rows, {
        "case": "case", "contender": "contender", "ms/step": "ms",
        **{f"x {k}": lambda r, k=k: r["ms"] / r["of"][k] if k in r["of"] else None
           for k in ("pytorch", "floor")},
        "page faults/step": lambda r: int(r["faults"])}))
    targets = verdicts(timings, args.device)
    print(table("targets (docs/devices.md)", targets,
                {"target": "target", "measured": "ratio", "verdict": "verdict"}))
    calls = 20 if args.quick else 2000
    overhead = overhead_rows(calls, 3 if args.quick else 15, with_torch=twins is not None)
    print(table(f"autograd overhead per op on {SHAPE} float32 host arrays, minus bare NumPy (µs)",
                overhead, {"op": "op", "numpy": "numpy_us", "scratchpar": "scratchpar_us",
                           "overhead": "overhead_us", "pytorch overhead": "torch_overhead_us"}))
    return {"repeats": repeats, "warmup": warmup, "versions": libraries, "malloc": malloc,
            "cases": {c.name: c.description for c in cases}, "equivalence": equivalence,
            "per_step": timings, "targets": targets, "overhead_us": overhead}


BENCHMARK = Benchmark("one training step against PyTorch eager and a NumPy floor, from the "
                      "same weights after an equivalence check", "a few repeats only", measure,
                      add_arguments)
