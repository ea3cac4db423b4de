"""The floating-point work of a training step: the matrix products of each model, forward and
backward, per row of the batch (a sequence of T tokens, or a sample).

A product of (M, K) by (K, N) is 2·M·K·N FLOP. Its backward computes the gradient of each
operand that needs one, another 2·M·K·N each: twice the forward, but for a first layer, whose
input (the data) needs none. Of the backward, the weights' gradients are ``weight``: a product
with a parameter gets its weight gradient from the same 2·M·K·N, which a zero-bubble schedule
runs apart as W (Qi et al. 2023, §2); the products of two activations (QKᵀ, AV) have none.
Elementwise ops, norms and softmax are memory-bound, not counted here; the embedding's lookup
is a gather, no product.

Per sequence of T tokens, a GPT block of width C with H query heads of d = C/H, G key/value
heads (K = G·d wide) and an F-wide feed-forward does 2·T·C·(C + 2K) for the fused Q, K, V,
2·T·C² for the projection and 4·T·C·F for the feed-forward, plus 4·T²·C for the scores QKᵀ and
their weighted sum AV over all T positions (the causal mask hides half of them but the product
computes them all; under grouped-query attention every query head still attends, Ainslie et
al. 2023, §2.2), and the head 2·T·C·V. With K = C and F = 4C that is 24·T·C² a block (Kaplan
et al. 2020, Table 1, count the same terms).

A recurrent layer of H units with G gates (1 Elman, 4 LSTM) on D inputs does 2·T·G·H·(D + H),
and its first step's state is zero, a constant that needs no gradient; the head 2·T·H·V. An
MLP does 2·Σ dᵢ·dᵢ₊₁ per sample.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Work:
    """FLOP per row of the batch: forward and backward, and of the backward the weights'
    gradients."""

    forward: int
    backward: int
    weight: int = 0

    @property
    def step(self) -> int:
        return self.forward + self.backward


def gpt(vocab: int, seq_len: int, d_model: int, n_layers: int, *, kv: int | None = None,
        wide: int | None = None) -> Work:
    return total(gpt_layers(vocab, seq_len, d_model, n_layers, kv=kv, wide=wide))


def gpt_layers(vocab: int, seq_len: int, d_model: int, n_layers: int, *,
               kv: int | None = None, wide: int | None = None) -> list[Work]:
    """[embedding, block 0, …, block L−1, final norm and head], as ``nn.GPT`` lists them; K =
    ``kv`` the width of its keys (and of its values), G·d (None: C), F = ``wide`` (None:
    4C)."""
    t, c = seq_len, d_model
    k, f = c if kv is None else kv, 4 * c if wide is None else wide
    # Q, K, V; the projection; the feed-forward's two (at K = C, F = 4C: 24·T·C², Kaplan)
    weights = 2 * t * c * (c + 2 * k) + 2 * t * c * c + 4 * t * c * f
    head = 2 * t * c * vocab
    block = weights + 4 * t * t * c
    # the embedding feeds every product: all need gradients
    return [Work(0, 0), *[Work(block, 2 * block, weights)] * n_layers, Work(head, 2 * head, head)]


def recurrent(vocab: int, seq_len: int, d_embed: int, d_hidden: int, n_layers: int,
              gates: int) -> Work:
    return total(recurrent_layers(vocab, seq_len, d_embed, d_hidden, n_layers, gates))


def recurrent_layers(vocab: int, seq_len: int, d_embed: int, d_hidden: int, n_layers: int,
                     gates: int) -> list[Work]:
    """[embedding, recurrent layer 0, …, head], as ``nn.RNNLanguageModel`` lists them."""
    t, h = seq_len, d_hidden
    found = [Work(0, 0)]
    for i in range(n_layers):
        forward = 2 * t * gates * h * ((d_embed if i == 0 else h) + h)
        found.append(Work(forward, 2 * forward - 2 * gates * h * h, forward))  # h₀: none
    head = 2 * t * h * vocab
    return [*found, Work(head, 2 * head, head)]


def mlp(sizes: list[int]) -> Work:
    return total(mlp_layers(sizes))


def mlp_layers(sizes: list[int]) -> list[Work]:
    """[Linear+ReLU, …, Linear], as ``nn.MLP`` lists them."""
    products = [2 * a * b for a, b in zip(sizes, sizes[1:])]
    return [Work(f, f if i == 0 else 2 * f, f)  # the data needs no gradient
            for i, f in enumerate(products)]


def total(layers: list[Work]) -> Work:
    return Work(sum(w.forward for w in layers), sum(w.backward for w in layers),
                sum(w.weight for w in layers))


def of(cfg, vocab: int) -> Work:
    """The work per row of the model ``cfg`` (a run's Config) names, over a vocabulary of
    ``vocab`` symbols where it is a language model."""
    return total(layers(cfg, vocab))


def layers(cfg, vocab: int) -> list[Work]:
    """The work per row of each of the model's pipeline layers, in order, with what
    ``--recompute`` adds to their backward (:func:`recomputed`)."""
    m, d = cfg.model, cfg.data
    if m.kind == "gpt":
        found = gpt_layers(vocab, d.seq_len, m.d_model, m.n_layers, kv=m.key_width,
                           wide=m.wide)
    elif m.kind in ("lstm", "rnn"):
        found = recurrent_layers(vocab, d.seq_len, m.d_model, m.d_hidden, m.n_layers,
                                 4 if m.kind == "lstm" else 1)
    elif m.kind == "mlp":
        found = mlp_layers([d.n_features, *m.hidden_sizes, d.n_classes])
    else:
        raise ValueError(f"model {m.kind} does its work in gathers, not matrix products: "
                         "its FLOP count is not this model's")
    return recomputed(found, cfg)


def recomputed(found: list[Work], cfg) -> list[Work]:
    """``found`` with each recomputed forward added to its layer's backward. ``full`` runs
    again every layer but the last (``nn.recompute.chosen``; Chen et al. 2016), or, in a
    pipeline, every chunk a stage re-materializes: the last layer too (Huang et al. 2019,
    §2.1). ``selective`` runs again each block's attention core, whose products are the
    4·T²·C of QKᵀ and AV (Korthikanti et al. 2022, §5). A zero-bubble W rebuilds its layer
    once more; that forward is not counted."""
    mode = cfg.train.recompute
    if mode == "full":
        last = len(found) - (cfg.train.strategy not in ("pipeline", "hybrid"))
        return [Work(w.forward, w.backward + w.forward * (i < last), w.weight)
                for i, w in enumerate(found)]
    if mode == "selective" and cfg.model.kind == "gpt":
        core = 4 * cfg.data.seq_len ** 2 * cfg.model.d_model
        return [found[0], *[Work(w.forward, w.backward + core, w.weight) for w in found[1:-1]],
                found[-1]]
    return found
