"""Published runs on thousands of GPUs, each as the training flags that describe it, and the
planner's prediction of its step beside the figure its paper gives (docs/plan.md, "Against
published runs").

A paper gives seconds per iteration, or FLOP/s per GPU under a stated convention. Model FLOP
(PaLM's MFU: Chowdhery et al. 2022, App. B) count a step's work once; hardware FLOP count a
recomputed forward again. Narayanan et al. 2021 (eq. 3) give a GPT step of B sequences of s
tokens, l layers of width h and a V-symbol vocabulary as

    F = 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h))      model FLOP, no recomputation
    F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))      hardware FLOP, full recomputation

so a rate R per GPU on N GPUs is a step of F/(R·N) seconds: F is three times the forward of
``flops.py``, whose GPT of 12·h² weights a block gives eq. 3 exactly. Llama 3's block
(grouped-query attention over 8 KV heads, a SwiGLU feed-forward of 53,248) holds 11.875·h²
weights, and its paper's rates count its own model's FLOP: its rows give their step as F of
the GPT the planner prices it as, of the same weights and FLOP (``others``).
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass

from ..train.cli import load_config
from . import flops
from .predict import from_profile

KORTHIKANTI = "Korthikanti et al. 2022, Tables 3 and 5"
MT_NLG = "Smith et al. 2022 (MT-NLG), §2.4"
BLOOM = "BigScience 2022 (BLOOM), tr11-176B-ml log, iteration 85,376"
LLAMA3 = "Dubey et al. 2024 (Llama 3), Table 4"
FITTED = "175B full"  # the one run the profiles' n½ is fitted on (kernels.py)


@dataclass(frozen=True)
class Published:
    """One published run: what it trained, on how many GPUs of which profile, and its step."""

    source: str
    name: str
    flags: tuple[str, ...]
    gpus: int
    profile: str
    seconds: float
    given: str  # the figure as the paper gives it

    def config(self):
        return load_config(list(self.flags), self.gpus, planning=True)


def gpt(h: int, layers: int, heads: int, seq: int, vocab: int, batch: int) -> tuple[str, ...]:
    return ("--model", "gpt", "--d-model", str(h), "--n-layers", str(layers), "--n-heads",
            str(heads), "--seq-len", str(seq), "--vocab-size", str(vocab), "--batch-size",
            str(batch), "--precision", "bf16")


def mesh(tp: int, pp: int, dp: int, m: int, virtual: int = 1) -> tuple[str, ...]:
    schedule = ("--pp-schedule", "interleaved", "--virtual", str(virtual)) if virtual > 1 \
        else ("--pp-schedule", "1f1b")
    return ("--strategy", "hybrid", "--tp", str(tp), "--pp", str(pp), "--dp", str(dp),
            "--microbatches", str(m), *schedule)


def model_flop(batch: int, seq: int, layers: int, h: int, vocab: int, *,
               kv: int | None = None, wide: int | None = None) -> float:
    """A step's model FLOP, without recomputation: Narayanan et al. 2021, eq. 3, for a GPT of
    keys ``kv`` wide and an MLP ``wide`` (None: h and 4h, eq. 3's own; ``flops.gpt_layers``)."""
    return batch * flops.gpt(vocab, seq, h, layers, kv=kv, wide=wide).step


def korthikanti() -> list[Published]:
    """tp 8, sequence 2048, vocabulary 51,200, no data parallelism, dropout 0.1; micro-batch
    4 at 22B, else 1; the interleaved schedule of 3 chunks at 175B and 530B."""
    rows = []
    for name, h, layers, heads, pp, batch, virtual, full, selective in (
            ("22B", 6144, 48, 64, 1, 4, 1, 1.42, 1.10),
            ("175B", 12288, 96, 96, 8, 64, 3, 18.13, 13.75),
            ("530B", 20480, 105, 128, 35, 280, 3, 49.05, 37.83),
            ("1T", 25600, 128, 160, 64, 512, 1, 94.42, 71.49)):
        m = 1 if pp == 1 else batch
        base = (*gpt(h, layers, heads, 2048, 51200, batch), *mesh(8, pp, 1, m, virtual),
                "--dropout", "0.1")
        rows += [Published(KORTHIKANTI, f"{name} full", (*base, "--recompute", "full"),
                           8 * pp, "dgx-a100", full, f"{full:.2f} s"),
                 Published(KORTHIKANTI, f"{name} selective + SP",
                           (*base, "--recompute", "selective", "--sequence-parallel"),
                           8 * pp, "dgx-a100", selective, f"{selective:.2f} s")]
    return rows


def others() -> list[Published]:
    """MT-NLG 530B at three data-parallel sizes (micro-batch 1, full recomputation, its
    vocabulary taken as Megatron's padded 51,200); BLOOM 176B (no dropout); Llama 3 405B's
    8K-token stage and its 131K-token stage on cp 16 with all-gathered keys and values (no
    recomputation; its interleaved schedule's chunks a rank are not published: taken as 4,
    two layers a chunk). Table 4 prints the 131K row's dp as 4, which does not multiply to
    its 16,384 GPUs; dp 8 does, and gives its 16M tokens a batch: 128 sequences, 16 a
    replica."""
    rows = [Published(MT_NLG, f"530B on {8 * 35 * dp} GPUs",
                      (*gpt(20480, 105, 128, 2048, 51200, 1920),
                       *mesh(8, 35, dp, 1920 // dp), "--dropout", "0.1", "--recompute", "full"),
                      8 * 35 * dp, "dgx-a100", seconds, f"{seconds} s")
            for dp, seconds in ((8, 60.1), (10, 50.2), (12, 44.4))]
    rows.append(Published(BLOOM, "176B", (*gpt(14336, 70, 112, 2048, 250880, 2048),
                                          *mesh(4, 12, 8, 128), "--recompute", "full"),
                          384, "dgx-a100", 104.7, "104.7 s"))
    # Llama 3's block (Table 3) as a GPT of its weights and FLOP: 8 key/value heads of d = 128
    # (Q, K, V (128 + 2·8)·128·h = 1.125·h²); its SwiGLU's three h × 53,248 matrices (9.75·h²)
    # approximated by the engine's two-matrix GELU MLP 1.5 × 53,248 = 79,872 wide: 2·79,872·h
    # = 9.75·h² weights, 4·79,872·h = 6·53,248·h FLOP a token (its gate's elementwise product
    # aside); with the projection's h², 11.875·h² a block
    kv, wide = 8 * 128, 79872
    for seq, batch, cp, dp, rate in ((8192, 2048, 1, 64, 430e12), (8192, 2048, 1, 128, 400e12),
                                     (131072, 128, 16, 8, 380e12)):
        gpus = 8 * 16 * cp * dp
        seconds = model_flop(batch, seq, 126, 16384, 128256, kv=kv, wide=wide) / (rate * gpus)
        context = ("--cp", str(cp), "--cp-attention", "allgather") if cp > 1 else ()
        rows.append(Published(LLAMA3, f"405B at {seq // 1000}K, cp {cp}" if cp > 1 else
                              f"405B on {gpus:,} GPUs",
                              (*gpt(16384, 126, 128, seq, 128256, batch), "--kv-heads", "8",
                               "--d-ff", str(wide), *mesh(8, 16, dp, batch // dp, 4), *context),
                              gpus, "dgx-h100", seconds, f"{rate / 1e12:.0f} TFLOP/s model"))
    return rows


def runs() -> list[Published]:
    return korthikanti() + others()


@dataclass(frozen=True)
class Timed:
    """A plan whose own time is judged: ``python -m scratchpar.plan --world W --profile P
    -- FLAGS`` within ``seconds`` on one core."""

    name: str
    world: int
    profile: str
    flags: tuple[str, ...]
    seconds: float


def timed() -> list[Timed]:
    """The docs' 1.2B GPT on 128 H100s; the 1T GPT on 3,072 A100s, with full recomputation,
    at Korthikanti et al.'s batch of 512 and at Narayanan et al.'s of 3,072 (2021, Table 1)."""
    return [Timed("1.2B GPT", 128, "dgx-h100", gpt(2048, 20, 16, 1024, 51200, 128), 3.0),
            *(Timed(f"1T GPT, batch {batch}", 3072, "dgx-a100",
                    (*gpt(25600, 128, 160, 2048, 51200, batch), "--recompute", "full"), 30.0)
              for batch in (512, 3072))]


def predicted(run: Published, profile) -> float:
    """The planner's step of ``run`` on ``profile`` (its kernels where it declares them)."""
    return from_profile(run.config(), run.gpus, profile).step_s


def errors(rows: list[dict], fitted: str) -> dict:
    """The median and worst |error| over the rows not fitted on."""
    rest = sorted(abs(r["error"]) for r in rows if r["run"] != fitted)
    return {"rows": len(rest), "median": statistics.median(rest), "worst": rest[-1]}


def fit_half(run: Published, profile, high: float = 8192.0) -> float:
    """n½ at which the planner predicts ``run``'s step exactly, the profile's other constants
    held: a larger n½ slows every product, so bisection finds it."""
    low = 0.0
    for _ in range(30):
        middle = (low + high) / 2
        kernels = dataclasses.replace(profile.kernels, half_size=middle)
        if predicted(run, dataclasses.replace(profile, kernels=kernels)) < run.seconds:
            low = middle
        else:
            high = middle
    return (low + high) / 2
