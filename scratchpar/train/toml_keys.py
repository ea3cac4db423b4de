"""The TOML file's keys beside the flags: a run's config written as TOML, and the key meant
where a file names one that does not exist.

A key is its field's name in its table: ``--d-model`` is ``[model] d_model``. Two flags read
otherwise, because their fields are named for what they hold: ``--model`` is ``[model] kind``
and ``--data`` is ``[data] path``.
"""

from __future__ import annotations

import dataclasses
import difflib
import json

from .option import flag_of


def to_toml(cfg) -> str:
    """``cfg`` as a TOML file that ``--config`` reads back to the same config. A value that
    is not set (TOML has no null) is a comment."""
    lines = []
    for part in dataclasses.fields(cfg):
        section = getattr(cfg, part.name)
        lines.append(f"[{part.name}]")
        for f in dataclasses.fields(section):
            value = getattr(section, f.name)
            if value is None:
                lines.append(f"# {f.name}: not set ({flag_of(f)})")
            else:
                lines.append(f"{f.name} = {_value(value)}")
        lines.append("")
    return "\n".join(lines)


def _value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(map(_value, value)) + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string
    if isinstance(value, float) and value != value:
        return "nan"
    if isinstance(value, float) and abs(value) == float("inf"):
        return "inf" if value > 0 else "-inf"
    return repr(value)


def suggestion(sections: dict, section: str, name: str) -> str:
    """What ``[section] name`` probably meant, for its "unknown key" line: the key of the flag
    it is named after (``model`` → ``[model] kind``), the same key in another table, or a
    close spelling; empty when nothing is close."""
    flag = "--" + name.replace("_", "-")
    keys = {(s, f.name): f for s, cls in sections.items() for f in dataclasses.fields(cls)}
    for (s, key), f in keys.items():
        if flag_of(f) == flag and (s, key) != (section, name):
            return f" ({flag} is [{s}] {key})"
    close = difflib.get_close_matches(name, [key for s, key in keys if s == section], n=1)
    if close:
        return f" (did you mean [{section}] {close[0]}?)"
    close = difflib.get_close_matches(name, [key for _, key in keys], n=1)
    if close:
        s = next(s for s, key in keys if key == close[0])
        return f" (did you mean [{s}] {close[0]}?)"
    return ""
