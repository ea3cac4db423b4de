"""What a sparse GPT asks of the run, in the command line's words (``nn/moe.py``)."""

from __future__ import annotations


def expert_problems(c) -> list[str]:
    """Every reason ``--experts`` and its knobs cannot make this run's model sparse: one
    device trains it, or the hybrid mesh, whose ranks route over the whole micro-batch (a
    data-parallel rank alone would route, cap and balance its own rows, not one device's)."""
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
    if t.strategy not in ("single", "hybrid", "zero"):
        problems.append(f"--experts trains with --strategy single, hybrid or zero, not "
                        f"{t.strategy}: those route, cap and balance over every rank's tokens "
                        "of a micro-batch, and hybrid splits the experts over --ep")
    elif t.strategy == "hybrid":
        problems += _mesh_problems(c)
    return problems


def _mesh_problems(c) -> list[str]:
    """What ``--ep`` and the other axes ask of a sparse model under ``--strategy hybrid``."""
    m, t = c.model, c.train
    problems = []
    if m.experts % t.ep:
        problems.append(f"--ep {t.ep} gives each rank an equal share of a sparse layer's "
                        f"experts: --experts {m.experts} does not divide by {t.ep}")
    if t.sequence_parallel:
        problems.append("--sequence-parallel gives each tp rank its own tokens of a sparse "
                        "block, which the routing's tally does not count: drop it with "
                        "--experts")
    return problems


def ep_problems(c, replicas: int) -> list[str]:
    """Why ``--ep`` cannot fold onto the ``replicas`` dp × cp ranks of this run."""
    t = c.train
    if t.ep == 1:
        return []
    problems = []
    if c.model.experts == 0:
        problems.append(f"--ep {t.ep} splits a sparse model's experts: give --experts")
    if replicas % t.ep:
        problems.append(f"--ep {t.ep} folds onto the dp × cp ranks, {replicas} here: it must "
                        "divide them")
    return problems


def experts_shape(m) -> tuple[int, int, int]:
    """(sparse blocks, their experts' parameters, k) of ``cfg.model``: every ``moe_every``-th
    block holds E experts of C → 4C → C with biases, 8C² + 5C parameters each."""
    if m.experts == 0:
        return 0, 0, 1
    blocks = m.n_layers // m.moe_every
    return blocks, blocks * m.experts * (8 * m.d_model ** 2 + 5 * m.d_model), m.top_k


def expert_layout(cfg, replicas: int) -> str:
    """What rank 0 says of a sparse model's experts over ``replicas`` dp × cp ranks."""
    t, e = cfg.train, cfg.model.experts
    return (f"each sparse block's {e} experts split over {t.ep} ep rank"
            f"{'s' if t.ep > 1 else ''} of the {replicas} dp × cp ranks, {e // t.ep} each, "
            "capacity counted over "
            + ("the micro-batch" if t.capacity_scope == "global" else "each rank"))
