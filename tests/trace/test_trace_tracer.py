"""The tracer records regions on a clock zeroed at a barrier; a traced communicator records every
collective with its bytes; tracing off hands back one shared no-op."""

import json
import pickle
import time

import numpy as np
import pytest

from scratchpar.trace.tracer import NULL, Event, Tracer


def test_regions_are_recorded_in_order_with_their_times_and_bytes():
    tracer = Tracer(rank=3)
    with tracer.region("forward", "compute"):
        time.sleep(0.002)
    with tracer.region("all_reduce", "comm", nbytes=4096):
        pass
    forward, reduce = tracer.events
    assert (forward.name, forward.cat, forward.bytes) == ("forward", "compute", 0)
    assert (reduce.name, reduce.cat, reduce.bytes) == ("all_reduce", "comm", 4096)
    assert forward.end - forward.start >= 2_000_000  # ns: it slept 2 ms
    assert 0 <= forward.start and forward.end <= reduce.start <= reduce.end <= tracer.now()


def test_a_region_ends_when_its_block_raises():
    tracer = Tracer()
    with pytest.raises(KeyError), tracer.region("backward", "compute"):
        raise KeyError("boom")
    assert [e.name for e in tracer.events] == ["backward"]


def test_align_starts_the_clock_when_the_barrier_returns():
    tracer, calls = Tracer(), []

    def barrier():
        calls.append(tracer.now())
        time.sleep(0.01)

    tracer.align(barrier)
    assert len(calls) == 1
    assert calls[0] >= 0 and 0 <= tracer.now() < 10_000_000  # zero after the 10 ms barrier
    before = time.perf_counter_ns()
    assert tracer.origin_ns <= before and tracer.now() >= before - tracer.origin_ns


def test_export_survives_pickle_and_json():
    tracer = Tracer(rank=1)
    tracer.record("step", "compute", 5, 9, 0)
    tracer.record("broadcast/tree", "comm", 6, 8, 64)
    out = tracer.export()
    assert pickle.loads(pickle.dumps(out)) == json.loads(json.dumps(out)) == out
    assert out["rank"] == 1 and out["origin_ns"] == tracer.origin_ns
    assert [Event(**e) for e in out["events"]] == tracer.events


def test_tracing_off_records_nothing_and_allocates_no_region():
    assert not NULL.enabled and Tracer.enabled
    first = NULL.region("forward", "compute")
    assert NULL.region("backward", "compute", 8) is first  # one shared no-op context
    with first:
        pass


def test_a_traced_communicator_records_its_collectives_and_its_dups_do_too():
    from scratchpar.comm import collectives
    from scratchpar.comm.mpi import Communicator

    world = Communicator(name="world")
    assert world.tracer is None
    world.tracer = Tracer(world.rank)
    sub = world.split(0).dup()
    assert sub.tracer is world.tracer
    x = np.arange(10.0)  # 80 bytes
    collectives.all_reduce(world, x, algorithm="ring")
    handle = collectives.all_reduce_start(sub, x.astype(np.float32))  # 40 bytes
    handle.wait()
    collectives.broadcast_(world, x)
    names = [(e.name, e.cat, e.bytes) for e in world.tracer.events]
    assert names == [("all_reduce/ring", "comm", 80),
                     ("all_reduce/recursive_doubling", "comm", 40),
                     ("broadcast/tree", "comm", 80)]
    assert all(0 <= e.start <= e.end for e in world.tracer.events)
