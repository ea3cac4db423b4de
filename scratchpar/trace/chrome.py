"""Every rank's events merged into one Chrome trace JSON (pid = rank, tid = lane) for Perfetto."""

from __future__ import annotations

import json
from pathlib import Path

LANES = ("compute", "comm")  # categories with a fixed lane; others follow in order of appearance


def to_chrome(ranks: list[dict]) -> dict:
    """The Trace Event Format of ``Tracer.export()`` from every rank: complete events
    (``ph: "X"``, ``ts``/``dur`` in µs), named processes ("rank r") and threads (the lanes)."""
    lanes = {cat: tid for tid, cat in enumerate(LANES)}
    events = []
    for r in ranks:
        pid = r["rank"]
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                       "args": {"name": f"rank {pid}"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                       "args": {"sort_index": pid}})
        for e, lane in stack(r["events"]):
            tid = lanes.setdefault(lane, len(lanes))
            events.append({"ph": "X", "name": e["name"], "cat": e["cat"], "pid": pid, "tid": tid,
                           "ts": e["start"] / 1e3, "dur": (e["end"] - e["start"]) / 1e3,
                           "args": {"bytes": e["bytes"]}})
    for r in ranks:  # name every lane in every process, so rank lanes line up
        events += [{"ph": "M", "name": "thread_name", "pid": r["rank"], "tid": tid,
                    "args": {"name": cat}} for cat, tid in lanes.items()]
    origins = {str(r["rank"]): r["origin_ns"] for r in ranks}
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"clock": "perf_counter_ns, zero at a barrier on every rank",
                          "origin_ns": origins}}


def stack(events: list[dict]) -> list[tuple[dict, str]]:
    """Each event with its lane: its category, or "comm 2", "comm 3", … while earlier regions
    of the category are still open (collectives in flight together), since a trace viewer
    draws one lane's regions as a strictly nested stack."""
    ends: dict[str, list[int]] = {}  # per category: when each of its lanes is free again
    placed = []
    for e in sorted(events, key=lambda e: (e["start"], -e["end"])):
        free = ends.setdefault(e["cat"], [])
        level = next((i for i, end in enumerate(free) if end <= e["start"]), len(free))
        free[level:level + 1] = [e["end"]]
        placed.append((e, e["cat"] if level == 0 else f"{e['cat']} {level + 1}"))
    return placed


def write_chrome(path: str, ranks: list[dict]) -> str:
    """Write the merged trace of ``ranks`` to ``path`` (parent folders made); returns it."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        json.dump(to_chrome(ranks), f)
    return path


def read_regions(path: str) -> list[dict]:
    """The complete events (``ph: "X"``) of a Chrome trace file; ``cat`` defaults to "other"."""
    with open(path) as f:
        trace = json.load(f)
    if not isinstance(trace, dict) or "traceEvents" not in trace:
        raise ValueError(f"{path} is not a Chrome trace: no traceEvents")
    return [{"cat": "other", **e} for e in trace["traceEvents"] if e.get("ph") == "X"]
