"""Every rank's events merge into one Chrome trace (pid = rank, a lane per category, µs times);
a one-rank data-parallel run writes one."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scratchpar.trace.chrome import read_regions, stack, to_chrome, write_chrome
from scratchpar.train import ConfigError, build_trainer


def event(name, cat, start, end, nbytes=0):
    return {"name": name, "cat": cat, "start": start, "end": end, "bytes": nbytes}


RANKS = [
    {"rank": 0, "origin_ns": 111, "events": [
        event("forward", "compute", 1_000, 3_500),
        event("backward", "compute", 3_500, 9_000),
        event("all_reduce/ring", "comm", 5_000, 8_000, 4096),
        event("all_reduce/ring", "comm", 6_000, 10_000, 1024)]},  # in flight with the first
    {"rank": 1, "origin_ns": 222, "events": [event("forward", "compute", 1_500, 4_000)]},
]


def test_ranks_become_processes_and_categories_lanes_with_times_in_microseconds():
    trace = to_chrome(RANKS)
    assert json.loads(json.dumps(trace)) == trace
    regions = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert [(e["pid"], e["name"], e["ts"], e["dur"]) for e in regions] == [
        (0, "forward", 1.0, 2.5), (0, "backward", 3.5, 5.5), (0, "all_reduce/ring", 5.0, 3.0),
        (0, "all_reduce/ring", 6.0, 4.0), (1, "forward", 1.5, 2.5)]
    assert [e["args"]["bytes"] for e in regions] == [0, 0, 4096, 1024, 0]
    lanes = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert [lanes[e["pid"], e["tid"]] for e in regions] == [
        "compute", "compute", "comm", "comm 2", "compute"]
    processes = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
                 if e["ph"] == "M" and e["name"] == "process_name"}
    assert processes == {0: "rank 0", 1: "rank 1"}
    assert trace["otherData"]["origin_ns"] == {"0": 111, "1": 222}


intervals = st.lists(st.tuples(st.integers(0, 50), st.integers(1, 20)), max_size=30)


@given(intervals)
def test_stack_never_overlaps_two_regions_in_a_lane_and_uses_as_few_lanes_as_possible(spans):
    events = [event(str(i), "comm", s, s + d) for i, (s, d) in enumerate(spans)]
    placed = stack(events)
    assert sorted(e["name"] for e, _ in placed) == sorted(e["name"] for e in events)
    by_lane = {}
    for e, lane in placed:
        by_lane.setdefault(lane, []).append(e)
    for lane in by_lane.values():
        lane.sort(key=lambda e: e["start"])
        assert all(a["end"] <= b["start"] for a, b in zip(lane, lane[1:]))
    depth = max((sum(o["start"] <= e["start"] < o["end"] for o in events) for e in events),
                default=0)  # the most regions open at once
    assert len(by_lane) == depth


def test_written_trace_reads_back(tmp_path):
    path = write_chrome(str(tmp_path / "sub" / "trace.json"), RANKS)
    regions = read_regions(path)
    assert [(e["pid"], e["cat"], e["name"]) for e in regions][:2] == [
        (0, "compute", "forward"), (0, "compute", "backward")]
    (tmp_path / "bad.json").write_text("[]")
    with pytest.raises(ValueError, match="not a Chrome trace"):
        read_regions(str(tmp_path / "bad.json"))


def test_a_one_rank_data_parallel_run_writes_its_regions(tmp_path, tiny_config):
    path = tmp_path / "trace.json"
    build_trainer(tiny_config(strategy="dp", steps=3, trace=str(path))).run()
    regions = read_regions(str(path))
    assert {e["pid"] for e in regions} == {0}
    names = [e["name"] for e in regions if e["cat"] == "compute"]
    assert names == ["forward", "backward", "optimizer"] * 3
    comm = [e for e in regions if e["cat"] == "comm"]
    assert {e["name"].split("/")[0] for e in comm} == {"broadcast", "all_reduce"}
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in regions)


def test_trace_needs_a_parallel_strategy(tmp_path, tiny_config):
    with pytest.raises(ConfigError, match="--trace records a parallel strategy"):
        tiny_config(strategy="single", trace=str(tmp_path / "t.json"))
