"""``python -m scratchpar.batch``'s commands: each measures one claim about the batch size,
prints its table and draws its figure."""

from __future__ import annotations

from pathlib import Path

from ..bench.harness import Benchmark, describe, draw_figures, machine
from ..table import table
from .throughput import KNEE, MODELS, knee, sweep

QUICK_MODELS = {
    "gpt": ["--model", "gpt", "--d-model", "16", "--n-layers", "1", "--n-heads", "2",
            "--seq-len", "16"],
    "lstm": ["--model", "lstm", "--d-model", "16", "--d-hidden", "16", "--seq-len", "16"],
    "mlp": ["--model", "mlp", "--source", "classification", "--n-features", "16",
            "--hidden-sizes", "32"],
}
TIMING = {"repeats": 5, "warmup": 2, "rounds": 3}
QUICK_TIMING = {"repeats": 2, "warmup": 1, "rounds": 1}


def throughput(args) -> dict:
    """Each model's throughput on one device against its batch, 1 row to 2^k, and its knee."""
    models, timing = (QUICK_MODELS, QUICK_TIMING) if args.quick else (MODELS, TIMING)
    largest = args.largest or (8 if args.quick else 512)
    batches = [2**k for k in range(largest.bit_length()) if 2**k <= largest]
    print(f"batch throughput on {describe(args.device)}, {machine(args)}; each point the "
          f"median of {timing['repeats']} steps, the least of {timing['rounds']} rounds")
    sweeps, knees = {}, {}
    for model, flags in models.items():
        rows = sweep([*flags, "--device", args.device], batches, **timing)
        sweeps[model], knees[model] = rows, knee(rows)
        shown = [{"ms": None, "rows_per_s": None, "units_per_s": None, "gain": None, **r,
                  **({"ms": 1e3 * r["seconds"]} if "seconds" in r else {}),
                  "note": "knee" if r["batch"] == knees[model] else r.get("refused")}
                 for r in rows]
        for small, big in zip(shown, shown[1:]):
            if small["rows_per_s"] and big["rows_per_s"]:
                big["gain"] = big["rows_per_s"] / small["rows_per_s"]
        unit = next((r["unit"] for r in rows if "unit" in r), "unit")
        where = f"the knee at {knees[model]}" if knees[model] else \
            f"no knee up to {shown[-1]['batch']}"
        print(table(f"{model} ({' '.join(flags)}), one device: {where} (past the knee, doubling "
                    f"the batch gains less than {KNEE - 1:.0%})", shown,
                    {"batch": "batch", "ms a step": "{ms:.2f}",
                     "rows/s": "{rows_per_s:,.0f}", f"{unit}/s": "{units_per_s:,.0f}",
                     "× on half the batch": "{gain:.2f}", "": "note"}))
    figures = draw_figures(args.figures, lambda d: [_plot(d, sweeps, knees)])
    return {"timing": timing, "sweeps": sweeps, "knees": knees, "figures": figures}


def _plot(directory: str, sweeps: dict, knees: dict) -> str:
    from .plot import plot_throughput

    return plot_throughput(sweeps, knees, str(Path(directory) / "batch_throughput.png"))


COMMANDS = {
    "throughput": Benchmark(
        "throughput against the batch on one device, for the GPT, the LSTM and the MLP, and "
        "where doubling the batch stops paying", "tiny models, batches 1 to 8", throughput,
        lambda parser: parser.add_argument("--largest", type=int, metavar="B",
                                           help="the largest batch tried, a power of two "
                                                "(default 512; --quick 8)"),
        figures="batch_throughput.png"),
}
