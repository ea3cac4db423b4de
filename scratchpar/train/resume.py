"""What a resumed run takes from its checkpoint: the config it was trained with, under the
values that may change between the two runs.

The arrays fix the model, and the data it learned from fixes the batches a resumed run must
see, so the ``[model]`` and ``[data]`` sections and the optimizer's kind are the checkpoint's:
a flag or TOML key that names another value is refused, naming both. Everything else (the
length of the run, the strategy and its layout, the learning-rate schedule, logging and
checkpoints) comes from the checkpoint too, unless this run says otherwise. A few values
belong to one run alone and are never carried over: where it stops early, what it resumes
from, its trace, and where it saves (a resumed run that inherited --save would overwrite the
checkpoint it came from).
"""

from __future__ import annotations

import dataclasses

from .checkpoint import CheckpointError, read_meta
from .config import SECTIONS
from .option import flag_of

FIXED_SECTIONS = ("model", "data")
FIXED_FIELDS = {("optim", "optimizer")}  # another optimizer's state would not fit
CHANGEABLE = {("model", "dropout")}  # changes no array
THIS_RUN_ONLY = {("train", "stop_after"), ("train", "resume"), ("train", "trace"),
                 ("train", "save"), ("train", "save_every"), ("train", "target_loss")}


def fixed(section: str, name: str) -> bool:
    """Whether a resumed run must keep the checkpoint's value of ``section.name``."""
    return ((section in FIXED_SECTIONS or (section, name) in FIXED_FIELDS)
            and (section, name) not in CHANGEABLE)


def trained_with(directory: str, named: dict | None = None, meta: dict | None = None
                 ) -> tuple[dict[str, dict], list[str]]:
    """The per-section values a checkpoint's run was trained with (``meta.json``'s config),
    those of one run alone left out, and any problem with them. Unknown sections and keys
    (another version's) are skipped. A strategy's own flags (its layout: the mesh's --pp and
    --tp, the servers, the ZeRO stage…) come as a whole or not at all: not where this run's
    ``[train]`` values (``named``) name another strategy or any such flag, since a layout
    half changed rarely fits. ``meta``: the checkpoint's, where the caller has read it. A
    checkpoint that cannot be read gives nothing here: loading it reports why, with its
    arrays."""
    named = named or {}
    try:
        config = (meta if meta is not None else read_meta(directory)).get("config", {})
    except CheckpointError:
        return {}, []
    if not isinstance(config, dict) or not all(isinstance(v, dict) for v in config.values()):
        return {}, [f"--resume {directory}: its meta.json's config is not a table of sections"]
    owned = {f.name for f in dataclasses.fields(SECTIONS["train"]) if f.metadata["owners"]}
    was = config.get("train", {}).get("strategy")
    layout = named.get("strategy", was) == was and not owned & set(named)
    values = {}
    for section, cls in SECTIONS.items():
        known = {f.name for f in dataclasses.fields(cls)}
        values[section] = {name: tuple(v) if isinstance(v, list) else v
                           for name, v in config.get(section, {}).items()
                           if name in known and (section, name) not in THIS_RUN_ONLY
                           and (layout or section != "train" or name not in owned)}
    return values, []


def contradictions(directory: str, trained: dict[str, dict],
                   given: dict[str, dict[str, tuple[object, str]]]) -> list[str]:
    """A line for each value ``given`` that differs from the checkpoint's in a section or
    field a resumed run must keep. ``given``: section → name → (value, where it was given:
    "" for a flag, "--config F: " for a TOML key)."""
    problems = []
    for section, names in given.items():
        fields = {f.name: f for f in dataclasses.fields(SECTIONS[section])}
        for name, (value, where) in names.items():
            if not fixed(section, name) or name not in trained.get(section, {}):
                continue
            was = trained[section][name]
            if value != was:
                f = fields[name]
                problems.append(f"{where}{as_given(f, value)} contradicts the checkpoint "
                                f"{directory}, trained with {as_given(f, was)}: a resumed run "
                                f"keeps the model, data and optimizer it was trained with "
                                f"(start a new run to change them)")
    return problems


def as_given(f, value) -> str:
    """``value`` of field ``f`` as its flag would say it: ``--d-model 64``, ``--no-tie-...``."""
    flag = flag_of(f)
    if isinstance(value, bool):
        return flag if value else "--no-" + flag[2:]
    if value is None:
        return f"no {flag}"
    return f"{flag} {','.join(map(str, value)) if isinstance(value, tuple) else value}"
