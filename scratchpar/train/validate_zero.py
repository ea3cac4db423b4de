"""The rules of ZeRO's flags: the stage and the offload belong to ``--strategy zero``."""

from __future__ import annotations

ZERO_DEFAULTS = {"--zero-stage": ("zero_stage", 1), "--offload": ("offload", "none")}


def zero_problems(c) -> list[str]:
    """Every reason the ZeRO flags cannot run; ZeRO shares the global batch as dp does, so the
    rest of its rules are dp's."""
    t = c.train
    given = [flag for flag, (name, default) in ZERO_DEFAULTS.items()
             if getattr(t, name) != default]
    if given and t.strategy != "zero":
        verb = "goes" if len(given) == 1 else "go"
        return [f"{', '.join(given)} {verb} with --strategy zero, not {t.strategy}"]
    return []
