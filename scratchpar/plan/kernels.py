"""A GPT's compute as the kernels that run it, for a machine that is not here (DESIGN.md, "the
planner's kernel model"). Each op costs

    its products' 2·M·K·N FLOP at  η·R·s / (s + n½)              (compute-bound)
  + the bytes its memory-bound passes move, at the bandwidth      (memory-bound)
  + a fixed cost per kernel launched                              (launch and host)

R is the device's peak FLOP/s in the run's precision, η the share of it a large product
reaches, s the product's smallest dimension and n½ the size at which it runs at half of η·R
(Hockney's half-performance length, Hockney & Jesshope 1981, §1.3.3). A profile's
[kernels] table gives η, n½ and the launch cost, and names the kernels they describe:

- ``engine``: this engine's, as ``python -m scratchpar.plan calibrate`` measures them: the
  (B, H, T, T) scores materialized and passed through scale, mask, softmax (and dropout) one
  op each, an op per node of the graph; ``census.py`` counts the ops and the passes from the
  engine's own graph, each pass in units of its activation, which the run's sizes price;
- ``fused``: Megatron-LM's (Narayanan et al. 2021, §4.2; Korthikanti et al. 2022): layer norm,
  bias-GELU, bias-dropout-add and scale-mask-softmax each one kernel, one read and one write;
  the attention's (B, H, T, T) scores written once, the softmax's output read by AV;
- ``flash``: the same with FlashAttention (Dao et al. 2022): the scores never leave the chip,
  and a causal mask skips the blocks above the diagonal, half of QKᵀ's and AV's products.

A block's products are Q, K, V's (C by (H + 2G)·d, G key/value heads of d = C/H; 3C with a
key/value head per query head), the projection's, and the feed-forward's C → F → C; QKᵀ and AV
run over every query head alike, grouped or not (Ainslie et al. 2023, §2.2). The passes
backward read the saved input and the output's gradient and write the input's
gradient: 3/2 of forward's bytes. A product's two gradients are products of its shape's three
sizes again (Mᵀ·G and G·Kᵀ), at its rate, each 2·M·K·N FLOP.
"""

from __future__ import annotations

from dataclasses import dataclass

from .census import census

KINDS = ("engine", "fused", "flash")
BACKWARD_BYTES = 1.5  # a pass backward moves 3 tensors for forward's 2
LAUNCHES = {"fused": (17, 34), "flash": (10, 22)}  # kernels of a block: forward, backward


@dataclass(frozen=True)
class Kernels:
    """A profile's [kernels]: which kernels its constants describe, η, n½ (elements) and a
    kernel's fixed seconds."""

    kind: str
    efficiency: float
    half_size: float = 0.0
    launch_s: float = 0.0


@dataclass
class Tally:
    """One pass so far: its products' seconds and the bytes its memory-bound passes move."""

    products_s: float = 0.0
    bytes: float = 0.0


def product_s(m: float, k: float, n: float, rate: float, kernels: Kernels,
              times: float = 1.0) -> float:
    """Seconds of ``times`` products (m, k) × (k, n) at η·R·s/(s + n½), s = min(m, k, n)."""
    s = min(m, k, n)
    return times * 2 * m * k * n / (rate * kernels.efficiency * s / (s + kernels.half_size))


def gpt_seconds(cfg, vocab: int, rows: int, profile, tp: int = 1,
                sequence_parallel: bool = False) -> tuple[float, float]:
    """(forward, backward) seconds of a tp rank's shard of the GPT ``cfg`` names on ``rows``
    sequences, ``--recompute`` included, with the profile's kernels (``tp`` 1: the whole
    model on one device)."""
    kernels, device = profile.kernels, profile.device
    m, t = cfg.model, cfg.data.seq_len
    rate, b = device.rate(cfg.train.precision), 2 if cfg.train.precision != "fp32" else (
        8 if cfg.train.dtype == "float64" else 4)
    c, heads, n = m.d_model, m.n_heads // tp, rows * t
    kv, f = m.key_width, m.wide  # K = G·d, the keys' (and values') width; F, the MLP's
    flash, engine, dropout = kernels.kind == "flash", kernels.kind == "engine", m.dropout > 0
    passes, ending = census(dropout, m.groups < m.n_heads) if engine else (None, None)
    stream = n * c / (tp if sequence_parallel else 1)  # the residual stream this rank holds
    scores = rows * heads * t * t

    def core(tally: Tally, times: float = 1.0) -> None:
        """QKᵀ and AV over the rank's heads, and the softmax and dropout between them."""
        causal = 0.5 if flash else 1.0  # FlashAttention skips the masked blocks
        d = c // m.n_heads
        tally.products_s += times * causal * (product_s(t, d, t, rate, kernels, rows * heads)
                                              + product_s(t, t, d, rate, kernels, rows * heads))
        if engine:
            tally.bytes += times * 2 * b * passes.units["scores"] * scores
        elif not flash:
            tally.bytes += times * (2 * scores * b + dropout * (2 * scores * b + scores))

    def block() -> Tally:
        tally = Tally()
        for k, out in ((c, (c + 2 * kv) // tp), (c // tp, c), (c, f // tp), (f // tp, c)):
            tally.products_s += product_s(n, k, out, rate, kernels)
        core(tally)
        if engine:
            split = (passes.units["heads"] * n * c + passes.units["groups"] * n * kv
                     + passes.units["wide"] * n * f) / tp  # elements of the rank's share
            tally.bytes += 2 * b * (passes.units["stream"] * stream + split)
        else:
            tally.bytes += (2 * 2 * stream * b  # two layer norms
                            + 2 * (3 * stream * b + dropout * stream)  # two bias-dropout-adds
                            + 2 * n * f // tp * b)  # bias-GELU
        return tally

    one = block()
    head = product_s(n, c, vocab // tp, rate, kernels)
    logits = n * vocab // tp * (4 + b)  # the fp32 cross-entropy reads the logits, writes
    ends = 2 * b * ending.units["stream"] * stream if engine else (
        2 * 2 * stream * b + 2 * n * c * b)  # final norm; embedding gather and add
    forward = m.n_layers * (one.products_s + _moved(one.bytes, device)) + head + _moved(
        logits + ends, device)
    backward = 2 * (m.n_layers * one.products_s + head) + BACKWARD_BYTES * (
        forward - m.n_layers * one.products_s - head)
    if cfg.train.recompute == "full":
        backward += forward - head - _moved(logits, device)
    elif cfg.train.recompute == "selective":
        again = Tally()
        core(again, m.n_layers)
        backward += again.products_s + _moved(again.bytes, device)
    counts = ((m.n_layers * passes.nodes + ending.nodes,) * 2 if engine
              else (m.n_layers * k for k in LAUNCHES[kernels.kind]))
    ahead, back = (k * kernels.launch_s for k in counts)
    return forward + ahead, backward + back + (cfg.train.recompute == "full") * ahead


def _moved(nbytes: float, device) -> float:
    return nbytes / device.bytes_per_s
