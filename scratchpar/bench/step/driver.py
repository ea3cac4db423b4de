"""The step benchmark: equivalence first, then the steps, the autograd's cost per op, the LSTM's
step against its length and the training command's step's memory."""

from __future__ import annotations

import numpy as np

from ... import backend, nn
from ...autograd import Tensor
from ...autograd import functional as F
from ...comm.mpi import Communicator
from ...jobs.harness import Benchmark, describe, judge
from ...plan.traced import traced
from ...table import table
from ...train import load_config
from ...train.memory import estimate, measurable
from ...train.memory_models import MiB
from ..timing import Timed, interleaved, on_host
from .cases import Case, gpt_case, mlp_case, ours, torch_twins

LOSS_RTOL, GRAD_RTOL = 1e-4, 1e-3
TARGETS = {  # (case, contender, baseline, at most): docs/devices.md
    "cpu": [("mlp", "scratchpar", "pytorch", 0.85), ("mlp", "scratchpar", "floor", 1.10),
            ("gpt", "scratchpar", "pytorch", 1.20)],
    "cuda": [("mlp", "scratchpar", "pytorch", 1.30), ("gpt", "scratchpar", "pytorch", 1.30),
             ("mlp", "fused", "pytorch", 1.10), ("gpt", "fused", "pytorch", 1.00),
             ("mlp", "captured", "pytorch", 1.10), ("gpt", "captured", "pytorch", 1.00)]}
TARGETS["double"] = [target for target in TARGETS["cuda"]  # the GPU path's rows, with no
                     if target[1] != "captured"]  # verdict (no real timing); no graph there
SHAPE = (8, 8)  # of the overhead's operands
OPS = {  # op → (the autograd op on Tensors a, b; bare NumPy's forward and backward of it)
    "add": (F.add, lambda a, b, g: a + b),
    "mul": (F.mul, lambda a, b, g: (a * b, g * b, g * a)),
    "matmul": (F.matmul, lambda a, b, g: (a @ b, g @ b.T, a.T @ g)),
    "relu": (lambda a, b: F.relu(a), lambda a, b, g: (a * (a > 0), g * (a > 0))),
    "sum": (lambda a, b: F.sum(a), lambda a, b, g: (a.sum(), np.broadcast_to(g, a.shape))),
    "reshape": (lambda a, b: F.reshape(a, -1), lambda a, b, g: (a.reshape(-1), g.reshape(a.shape))),
}
LSTM_BATCH, LSTM_EMBED, LSTM_HIDDEN, LSTM_VOCAB = 32, 64, 128, 64
FLAT = 1.2  # the target: the LSTM's per-token cost at the longest length ≤ this × the shortest's
RUNS = {"gpt": [], "gpt, dropout 0.1": ["--dropout", "0.1"], "lstm": ["--model", "lstm"]}


class NotEquivalent(AssertionError):
    """Two contenders disagree: timing them against each other would mean nothing."""


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


def median_ms(contenders: dict, repeats: int, warmup: int, calls: int = 1) -> dict[str, float]:
    """Median ms per call of each contender, timed in turns of ``calls`` calls."""
    samples = interleaved(contenders, repeats, warmup)
    return {name: 1e3 * float(np.median(s)) / calls for name, s in samples.items()}


def verdicts(timings: dict, device: str) -> list[dict]:
    """Each target of ``device``: a contender's time over its baseline's, and the verdict."""
    rows = []
    for case, contender, baseline, limit in TARGETS[device]:
        ms = timings[case]
        ratio = ms[contender] / ms[baseline] if baseline in ms else None
        rows.append({"target": f"{case}: {contender} <= {limit:.2f}x {baseline}",
                     "measured": ratio,
                     "verdict": judge(device, ratio, at_most=limit, missing="n/a (no torch)")})
    return rows


def overhead_rows(calls: int, repeats: int) -> list[dict]:
    """Per op: µs per forward+backward for NumPy and scratchpar, on host arrays whatever the
    device: the Python cost of a graph node (a GPU adds CuPy's launch latency)."""
    gen = np.random.default_rng(0)
    a, b = (gen.standard_normal(SHAPE).astype(np.float32) for _ in range(2))
    rows = []
    for name, (op, bare) in OPS.items():
        ta, tb = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
        g_out = np.ones_like(op(ta, tb).data)

        def graph(op=op, ta=ta, tb=tb, g=g_out):  # the one-op graph, from fresh leaves each time
            ta.grad = tb.grad = None
            op(ta, tb).backward(g)

        runners = {"numpy": lambda bare=bare, g=g_out: bare(a, b, g), "scratchpar": graph}
        us = {k: 1e3 * ms for k, ms in median_ms(
            {k: Timed(lambda fn=fn: [fn() for _ in range(calls)], on_host)
             for k, fn in runners.items()}, repeats, 1, calls).items()}
        rows.append({"op": name, **us, "overhead": us["scratchpar"] - us["numpy"]})
    return rows


def per_token(lengths: list[int], repeats: int, warmup: int) -> list[dict]:
    """Per length T: the median SGD step's ms of the LSTM language model on a batch of T tokens
    a row, and its µs per token (B·T), the lengths timed in turns."""
    steps = {}
    for n in lengths:
        gen = np.random.default_rng(0)
        model = nn.LSTMLanguageModel(LSTM_VOCAB, LSTM_EMBED, LSTM_HIDDEN, gen)
        batch = backend.to_device(gen.integers(1, LSTM_VOCAB, (LSTM_BATCH, n + 1)))  # (B, T+1)
        steps[n] = ours(model, lambda model=model, batch=batch: nn.lm_loss(model, batch)).step
    ms = median_ms(steps, repeats, warmup)
    return [{"length": n, "ms": ms[n], "us_per_token": 1e3 * ms[n] / (LSTM_BATCH * n)}
            for n in lengths]


def held(device: str, quick: bool) -> list[dict]:
    """Per default model of the training command, its own two steps on one rank: the peak of
    their arrays measured (``scratchpar.peak``) and expected (``train/memory.py``), in MiB. The
    graph keeps what backward reads (``autograd.tensor.Context``): here it shows."""
    rows, comm = [], Communicator(name="step")
    for name, more in RUNS.items():
        flags = [*more, *(["--batch-size", "4", "--seq-len", "16"] if quick else []),
                 "--device", device]
        cfg = load_config([*flags, "--steps", "2", "--warmup", "0"], world_size=1)
        expected, peak = measurable(cfg, estimate(cfg, 1, bound=False)), traced(comm, flags)
        rows.append({"model": name, "flags": " ".join(more) or "defaults",
                     "measured_mib": peak / MiB, "expected_mib": expected / MiB,
                     "error": expected / peak - 1})
    return rows


def measure(args) -> dict:
    repeats, warmup = (3, 1) if args.quick else (50, 5)
    backend.set_device(args.device)
    twins = torch_twins()
    print(f"step benchmark on {describe(args.device)}: median of {repeats} steps per contender "
          f"in turns after {warmup} warm-up steps"
          + ("" if args.device == "cpu" else ", each ending with a wait for its device")
          + ("; torch missing: PyTorch rows and targets skipped" if twins is None else
             f"; torch {twins.torch.__version__} on {twins.device_for(args.device).type}"))
    cases = [mlp_case(args.device), gpt_case(args.device)]
    print("\n".join(f"  {case.name}: {case.description}, float32, SGD" for case in cases))
    equivalence = [row for case in cases for row in compare(case)]
    print(table("equivalence: one forward+backward from identical weights, before timing: OK",
                equivalence, formats={"loss": ".6f", "loss_rel_err": ".1e", "grad_rel_err": ".1e"}))
    timings = {case.name: median_ms({c.name: c.step for c in case.contenders}, repeats, warmup)
               for case in cases}  # each step ends with its wait
    steps = [{"case": case, "contender": name, "ms/step": t,
              **{f"x {k}": t / ms[k] if k in ms else None for k in ("pytorch", "floor")}}
             for case, ms in timings.items() for name, t in ms.items()]
    print(table("ms per step", steps))
    targets = verdicts(timings, args.device)
    print(table("targets (docs/devices.md)", targets))
    overhead = overhead_rows(20 if args.quick else 2000, 3 if args.quick else 15)
    print(table(f"autograd overhead per op on {SHAPE} float32 host arrays, minus bare NumPy (µs)",
                overhead))
    lengths = per_token([8, 16] if args.quick else [32, 64, 128, 256, 512],
                        3 if args.quick else 10, 1 if args.quick else 2)
    flat = lengths[-1]["us_per_token"] / lengths[0]["us_per_token"]  # 1: linear in T
    print(table(f"LSTM language model, batch {LSTM_BATCH}, hidden {LSTM_HIDDEN}: a step against "
                f"the sequence length; per token, T = {lengths[-1]['length']} is {flat:.2f}x "
                f"T = {lengths[0]['length']} (target <= {FLAT}: "
                f"{judge(args.device, flat, at_most=FLAT)})", lengths))
    memory = held(args.device, args.quick)
    print(table("the training command's step on one rank: its peak, measured, beside the "
                "memory estimate's (train/memory.py)", memory, formats={"error": "+.1%"}))
    return {"equivalence": equivalence, "steps": steps, "targets": targets,
            "overhead_us": overhead, "lengths": lengths, "lengths_flatness": flat,
            "memory": memory}


BENCHMARK = Benchmark("one training step against PyTorch eager and a NumPy floor, from the "
                      "same weights after an equivalence check", "a few repeats only", measure)
