"""Output paths checked before the first step, so that a run never trains to the end and then
fails to write its metrics, trace or checkpoint, and never replaces a folder that is not its own."""

from __future__ import annotations

import itertools
import os
from pathlib import Path


def output_problems(cfg) -> list[str]:
    """What stops rank 0 (the writer) from creating ``--metrics``, ``--trace`` and ``--save``;
    also outputs that collide with each other or with ``--data``. Creates nothing."""
    t = cfg.train
    files = {"--metrics": t.metrics, "--trace": t.trace}
    checks = {flag: (path, _file_problem) for flag, path in files.items()}
    checks["--save"] = (t.save, _checkpoint_problem)
    problems = []
    for flag, (path, check) in checks.items():
        try:
            problem = None if path is None else check(path)
        except OSError as e:  # a name too long, a loop of links, …
            problem = e.strerror or str(e)
        if problem:
            problems.append(f"{flag} {path!r}: {problem}")
    named = {**files, "--save": t.save, "--data": cfg.data.path}
    real = {flag: os.path.realpath(path) for flag, path in named.items() if path}
    for a, b in itertools.combinations(real, 2):
        if real[a] == real[b]:
            problems.append(f"{a} and {b} name the same path, {named[a]}")
    inside = real.get("--save", "\0") + os.sep
    problems += [f"{flag} {named[flag]} lies inside --save {t.save}, which every checkpoint "
                 "replaces whole" for flag in real if real[flag].startswith(inside)]
    return problems


def _file_problem(path: str) -> str | None:
    """Why a file cannot be written at ``path`` (None if it can): it must be a regular file,
    or not exist yet, or be /dev/null. A pipe would block the run, a device fail it."""
    if not path:
        return "an empty path"
    target = Path(path)
    if target.is_dir():
        return "is a directory; give a file name"
    if target.exists():
        if not target.is_file() and not os.path.samefile(target, os.devnull):
            return "is not a regular file (a pipe, a device); give a file name"
        return None if os.access(target, os.W_OK) else "is not writable"
    return _creatable(target)


def _checkpoint_problem(path: str) -> str | None:
    """Why a checkpoint directory cannot be written at ``path``: it is written beside its
    destination and renamed into place, so an existing folder must be a checkpoint (or empty)."""
    if not path:
        return "an empty path"
    target = Path(os.path.abspath(path))
    if target.exists() and not target.is_dir():
        return "is a file; --save needs a directory"
    if target.is_dir() and any(target.iterdir()) and not (target / "meta.json").is_file():
        return ("exists and is not a checkpoint; refusing to replace it (a save replaces the "
                "whole folder)")
    if target.exists():
        parent = target.parent
        return None if os.access(parent, os.W_OK | os.X_OK) else f"{parent} is not writable"
    return _creatable(target)


def _creatable(target: Path) -> str | None:
    """Why ``target``, which does not resolve to anything, cannot be created with its missing
    parents: the nearest thing on its way must be a writable directory (a symbolic link that
    leads nowhere, or in a loop, is in the way)."""
    if os.path.islink(target):
        return "is a symbolic link that leads nowhere (dangling, or a loop)"
    ancestor = Path(os.path.abspath(target)).parent
    while not os.path.lexists(ancestor):
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        kind = "a symbolic link that leads nowhere" if ancestor.is_symlink() else \
            "not a directory"
        return f"cannot be created: {ancestor} is {kind}"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"cannot be created: {ancestor} is not writable"
    return None


def unshared_save(comm, save: str) -> list[str]:
    """Collective: whether every rank sees the folder ``--save`` writes in, as a checkpoint in
    pieces needs (each rank writes its own file there, rank 0 commits them). Rank 0 leaves a
    probe beside it, each rank looks for it, and rank 0 says which did not see it (``[]``
    elsewhere, and where all did)."""
    final = Path(os.path.abspath(save))
    probe = final.with_name(f".{final.name}.probe-{os.getpid()}")
    if comm.rank == 0:
        probe.parent.mkdir(parents=True, exist_ok=True)
        probe.touch()
    probe = Path(comm.allgather_obj(str(probe), "save folder")[0])
    seen = comm.allgather_obj(probe.is_file(), "save folder seen")
    if comm.rank != 0:
        return []
    probe.unlink(missing_ok=True)
    blind = [str(rank) for rank, saw in enumerate(seen) if not saw]
    return [f"--save {save}: rank{'s' if len(blind) > 1 else ''} {', '.join(blind)} of "
            f"{comm.size} cannot see the folder rank 0 writes in; each rank writes its own "
            "part of a checkpoint there, so it must be one that every rank sees (on a "
            "cluster, a shared filesystem)"] if blind else []
