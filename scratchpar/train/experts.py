"""What a sparse GPT asks of the run, in the command line's words (``nn/moe.py``)."""

from __future__ import annotations


def expert_problems(c) -> list[str]:
    """Every reason ``--experts`` and its knobs cannot make this run's model sparse. Until the
    expert axis exists it trains on one device: a data-parallel rank would route, cap and
    balance its own rows alone, not the batch's, and so not train one device's model."""
    m, t = c.model, c.train
    if m.experts == 0:
        return []
    if m.experts < 0:
        return [f"model.experts must be 0 (dense) or more; got {m.experts}"]
    problems = []
    if m.kind != "gpt":
        problems.append(f"--experts routes a GPT's feed-forward tokens; model {m.kind} has none")
    if not 1 <= m.top_k <= m.experts:
        problems.append(f"model.top_k must be from 1 to model.experts ({m.experts}); got "
                        f"{m.top_k}")
    if not 1 <= m.moe_every <= m.n_layers:
        problems.append(f"model.moe_every must be from 1 to model.n_layers ({m.n_layers}), so "
                        f"that a block is sparse; got {m.moe_every}")
    problems += [f"model.{name} must be 0 or more; got {getattr(m, name)}"
                 for name in ("capacity_factor", "balance_loss", "z_loss")
                 if getattr(m, name) < 0]
    if t.strategy != "single":
        problems.append(f"--experts trains with --strategy single for now, not {t.strategy}: "
                        "with no expert axis yet, each rank would route, cap and balance its "
                        "own rows alone")
    return problems
