"""Defaults that follow from other choices: the model a source brings, the optimizer and
learning rate a strategy or source brings, the warm-up a run's length brings. Every one applies
only where the run names no value of its own."""

from __future__ import annotations

MAX_DEFAULT_WARMUP = 100
OWN_MODEL = {"classification": "mlp", "sparse-logreg": "logreg",  # --model's default, for a
             "matrix-factorization": "factors"}  # source only one model learns
SPARSE = ("sparse-logreg", "matrix-factorization")  # sources Hogwild's paper trains by plain SGD
ADAM_LR = 6e-3
# plain SGD's rate per model (the others': SGD_LR_ANY), the best of a sweep over 1,500 default
# steps (gpt: 2.03 nats at 3, 2.42 at 1, 3.28 at 10; mlp: 1.47 at 1, 2.30 at 3 in 500): a
# sparse model's row is in few samples of a batch, and the mean over the batch scales its
# gradient down by about 1/B
SGD_LR = {"gpt": 3.0, "logreg": 10.0, "factors": 3.0}
SGD_LR_ANY = 1.0


def fill_defaults(values: dict[str, dict], steps: int) -> None:
    """Fill, in place, the per-section ``values`` that depend on others and were not given
    (``steps``: the run's length when ``values`` does not say it).

    Hogwild and the sparse sources bring plain SGD (Hogwild's write is its step). EASGD keeps
    the run's optimizer unless ``--momentum`` is given, which makes it EAMSGD: SGD with that
    Nesterov momentum. SGD's rate is plain SGD's for the model times (1 − μ), the same
    effective step η/(1 − μ) with momentum μ (gpt, μ = 0.9: 2.06 nats at 0.3)."""
    model, data, o, t = values["model"], values["data"], values["optim"], values["train"]
    if data.get("source") in OWN_MODEL:
        model.setdefault("kind", OWN_MODEL[data["source"]])
    plain = t.get("strategy") == "hogwild" or data.get("source") in SPARSE
    eamsgd = t.get("strategy") == "easgd" and o.get("momentum") is not None
    if o.get("optimizer") is None:
        o["optimizer"] = "sgd" if plain or eamsgd else "adamw"
    if o.get("momentum") is None:
        o["momentum"] = 0.0 if plain else 0.9
    if o.get("lr") is None:
        plain_lr = SGD_LR.get(model.get("kind", "gpt"), SGD_LR_ANY)
        o["lr"] = ADAM_LR if o["optimizer"] != "sgd" else \
            float(f"{plain_lr * (1 - o['momentum']):.12g}")  # 0.3, not 0.29999999999999993
    if o.get("warmup") is None:
        o["warmup"] = default_warmup(t.get("steps", steps))


def default_warmup(steps: int) -> int:
    """A tenth of the run, at most MAX_DEFAULT_WARMUP steps: a short run gets a short warm-up."""
    return min(MAX_DEFAULT_WARMUP, max(steps, 0) // 10)
