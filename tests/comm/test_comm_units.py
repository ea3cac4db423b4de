"""The small parts under the collectives: chunk layout, reduction ops, the watchdog's words."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scratchpar.comm import choice, chunks, ops, watchdog
from scratchpar.comm.errors import CommError
from scratchpar.comm.watchdog import Wait


@given(st.integers(0, 1000), st.integers(1, 64))
def test_counts_split_near_equally_with_the_extra_first(n, p):
    c = chunks.counts(n, p)
    assert len(c) == p and sum(c) == n
    assert max(c) - min(c) <= 1
    assert c == sorted(c, reverse=True)
    assert c.count(n // p + 1) == n % p


@given(st.integers(0, 1000), st.integers(1, 64))
def test_bounds_tile_the_range_in_order(n, p):
    b = chunks.bounds(n, p)
    assert [stop - start for start, stop in b] == chunks.counts(n, p)
    assert b[0][0] == 0 and b[-1][1] == n
    assert all(b[i][1] == b[i + 1][0] for i in range(p - 1))


def test_bounds_of_small_and_uneven_sizes():
    assert chunks.bounds(0, 3) == [(0, 0), (0, 0), (0, 0)]
    assert chunks.bounds(2, 3) == [(0, 1), (1, 2), (2, 2)]
    assert chunks.bounds(7, 3) == [(0, 3), (3, 5), (5, 7)]
    assert chunks.bounds(5, 1) == [(0, 5)]


@given(st.lists(st.integers(0, 50), max_size=10))
def test_offsets_are_exclusive_prefix_sums(sizes):
    assert chunks.offsets(sizes) == [sum(sizes[:i]) for i in range(len(sizes))]


@given(st.lists(st.integers(0, 50), max_size=10))
def test_spans_lie_end_to_end_one_size_each(sizes):
    spans = chunks.spans_of(sizes)
    assert [stop - start for start, stop in spans] == sizes
    assert [start for start, _ in spans] == chunks.offsets(sizes)


def test_auto_becomes_a_collectives_one_algorithm_and_a_wrong_name_is_refused():
    assert choice.resolve("broadcast", "auto") == "tree"
    assert choice.resolve("gather", "auto") == "linear"
    assert choice.resolve("all_reduce", "auto") == "auto"  # the buffer decides
    assert choice.resolve("reduce", "mpi") == "mpi"
    with pytest.raises(CommError, match="algorithm must be one of"):
        choice.resolve("all_gather_start", "mpi")


def test_check_op_refuses_unknown_ops_and_avg_of_integers():
    with pytest.raises(CommError, match="'prod'"):
        ops.check_op("prod", np.float64)
    with pytest.raises(CommError, match="int32"):
        ops.check_op("avg", np.int32)
    for op in ops.OPS:
        ops.check_op(op, np.float32)
    for op in ("sum", "max", "min"):
        ops.check_op(op, np.int64)


@pytest.mark.parametrize("op, want", [("sum", [4, 2, 5]), ("avg", [4, 2, 5]),
                                      ("max", [3, 2, 5]), ("min", [1, 0, 0])])
def test_combine_works_in_place(op, want):
    base, incoming = np.array([9.0, 1.0, 2.0, 5.0]), np.array([3.0, 0.0, 0.0])
    ops.combine(op, base[1:], incoming)  # through a view: the buffer itself changes
    assert base.tolist() == [9.0, *want]
    assert incoming.tolist() == [3.0, 0.0, 0.0]


def test_finish_divides_only_avg():
    for op in ops.OPS:
        acc = np.array([6.0, -3.0])
        ops.finish(op, acc, 3)
        assert acc.tolist() == ([2.0, -1.0] if op == "avg" else [6.0, -3.0])


def test_wait_describes_op_seq_buffer_and_peer():
    send = Wait("all_reduce/ring", 17, "send", (4, 8), np.dtype("float32"), 3)
    recv = Wait("all_reduce/ring", 17, "recv", (4, 8), np.dtype("float32"), 2)
    assert send.describe() == "all_reduce/ring #17 send of shape (4, 8) float32 to rank 3"
    assert recv.describe() == "all_reduce/ring #17 recv of shape (4, 8) float32 from rank 2"
    assert Wait("barrier", 5).describe().startswith("barrier #5")
    assert "rank" not in Wait("barrier", 5).describe()


def test_report_names_rank_communicator_waits_and_remedies():
    waits = [Wait("broadcast/tree", 9, "recv", (10,), np.dtype("int64"), 0),
             Wait("broadcast/tree", 9, "send", (10,), np.dtype("int64"), 5)]
    text = watchdog.report(2, "world/dp", waits, 61.04)
    assert text.startswith("rank 2 waited 61.0 s on world/dp: ")
    assert "broadcast/tree #9 recv of shape (10,) int64 from rank 0; " \
           "broadcast/tree #9 send of shape (10,) int64 to rank 5." in text
    assert "SCRATCHPAR_DEBUG=1" in text and watchdog.TIMEOUT_ENV in text
    assert "a request" in watchdog.report(0, "world", [], 1.0)


@pytest.mark.parametrize("raw, want", [(None, watchdog.DEFAULT_TIMEOUT_S), ("0", 0.0),
                                       ("2.5", 2.5), (" 30 ", 30.0)])
def test_default_timeout_reads_the_environment(monkeypatch, raw, want):
    if raw is None:
        monkeypatch.delenv(watchdog.TIMEOUT_ENV, raising=False)
    else:
        monkeypatch.setenv(watchdog.TIMEOUT_ENV, raw)
    assert watchdog.default_timeout() == want


@pytest.mark.parametrize("raw, match", [("soon", "number of seconds.*'soon'"),
                                        ("", "number of seconds"), ("-1", ">= 0")])
def test_default_timeout_refuses_bad_values(monkeypatch, raw, match):
    monkeypatch.setenv(watchdog.TIMEOUT_ENV, raw)
    with pytest.raises(ValueError, match=match):
        watchdog.default_timeout()


@pytest.mark.parametrize("raw, want", [(None, False), ("0", False), ("", False), ("1", True)])
def test_debug_mode_follows_the_environment(monkeypatch, raw, want):
    if raw is None:
        monkeypatch.delenv(watchdog.DEBUG_ENV, raising=False)
    else:
        monkeypatch.setenv(watchdog.DEBUG_ENV, raw)
    assert watchdog.debug_enabled() is want


def test_auto_all_reduce_follows_the_measured_crossover():
    assert choice.auto_all_reduce(1 << 20, 2) == "recursive_doubling"
    assert choice.auto_all_reduce((1 << 20) + 4, 2) == "rabenseifner"
    for p in (3, 4, 5, 6, 8):
        assert choice.auto_all_reduce(256 << 10, p) == "recursive_doubling"
        above = "rabenseifner" if p in (4, 8) else "ring"  # halving needs a power of two
        assert choice.auto_all_reduce((256 << 10) + 4, p) == above
