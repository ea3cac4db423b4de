"""The one timing loop: turns in rotation after an untimed warm-up, a median per phase, the
least of rounds, a trainer's steps on its batches in order, and the slowest rank's figure."""

from types import SimpleNamespace

import numpy as np

from scratchpar.timing import clocked, least, medians, slowest, steps, sync, turns


def test_contenders_take_turns_first_turn_rotating_after_an_untimed_warm_up():
    calls = []
    contenders = {name: (lambda name=name: calls.append(name) or (len(calls),))
                  for name in "abc"}
    samples = turns(contenders, repeats=3, warmup=1, start=lambda: calls.append("start"))
    played = [c for c in calls if c != "start"]
    assert played == list("abc" + "abc" + "bca" + "cab")
    assert calls.count("start") == len(played)  # before every call, warm-up included
    assert samples == {"a": [(8,), (18,), (22,)], "b": [(10,), (14,), (24,)],
                       "c": [(12,), (16,), (20,)]}  # what each call saw, in its turn


def test_the_median_is_each_phase_s_over_the_timed_calls_only():
    seconds = iter([(100.0, 100.0), (1.0, 6.0), (3.0, 4.0), (2.0, 5.0)])
    assert medians(lambda: next(seconds), repeats=3) == (2.0, 5.0)


def test_a_clocked_call_ends_after_its_wait():
    events = []
    (took,) = clocked(lambda: events.append("run"), lambda: events.append("wait"))()
    assert events == ["run", "wait"] and took >= 0


def test_the_least_round_by_its_sum_is_kept_for_each_key():
    rounds = {"x": iter([(3.0, 1.0), (1.0, 2.0), (2.0, 2.0)]), "y": iter([(5.0,), (4.0,),
                                                                            (6.0,)])}
    assert least(["x", "y"], lambda key: next(rounds[key]), 3) == {"x": (1.0, 2.0),
                                                                   "y": (4.0,)}


def test_a_trainer_s_steps_are_timed_on_its_batches_after_the_warm_up_s():
    drawn, stepped, started = [], [], []

    def batch(k, rows):
        drawn.append((k, rows))
        return f"batch {k}", None

    trainer = SimpleNamespace(task=SimpleNamespace(batch=batch),
                              strategy=SimpleNamespace(step=stepped.append))
    seconds = steps(trainer, 8, repeats=3, warmup=2, start=lambda: started.append(len(drawn)))
    assert len(seconds) == 3 and all(s >= 0 for s in seconds)
    assert drawn == [(k, 8) for k in range(5)] and started == [1, 2, 3, 4, 5]
    assert stepped == [f"batch {k}" for k in range(5)]


class TwoRanks:
    """A communicator whose other rank's seconds are ``theirs``: its barrier and all-reduce,
    in the order called."""

    def __init__(self, theirs):
        self.theirs, self.calls = np.asarray(theirs, dtype=np.float64), []

    def barrier(self):
        self.calls.append("barrier")

    def mpi_allreduce(self, sendbuf, recvbuf, op, blocking=False):
        self.calls.append((op, blocking))
        recvbuf[...] = np.maximum(sendbuf, self.theirs)


def test_the_slowest_rank_s_seconds_are_taken_element_wise_after_a_barrier():
    comm = TwoRanks([[1.0, 5.0, 2.0], [0.5, 0.5, 9.0]])
    worst = slowest(comm, [[3.0, 4.0, 2.0], [0.25, 1.0, 8.0]])
    assert worst.tolist() == [[3.0, 5.0, 2.0], [0.5, 1.0, 9.0]]  # (contenders, repeats)
    assert comm.calls == ["barrier", ("max", True)]  # gathered polled, released at once


def test_ranks_start_together_by_a_barrier_then_a_blocking_all_reduce():
    comm = TwoRanks([0.0])
    sync(comm)
    assert comm.calls == ["barrier", ("max", True)]
