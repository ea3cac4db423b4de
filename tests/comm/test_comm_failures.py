"""How a failing rank is reported: the abort hook's report, the last operation, MPI's errors.

One process (a world of one rank); the launch tests (tests/launch/test_launch_safety.py) run
the same paths on real jobs.
"""

import os
import sys
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from scratchpar.comm import abort, watchdog
from scratchpar.comm.errors import MessageError, WaitTimeout
from scratchpar.comm.mpi import Communicator

LAST = "all_reduce/ring #12 of shape (10,) float64 on world"


def fake_comm(size=3, last_op=LAST):
    aborted = []
    comm = SimpleNamespace(rank=1, size=size, last_op=last_op, abort=aborted.append)
    return comm, aborted


@pytest.fixture(autouse=True)
def ending(monkeypatch):
    """What ends the process after MPI_Abort, and what silences it, recorded instead."""
    calls = []
    monkeypatch.setattr(abort, "_quiet", lambda: calls.append("quiet"))
    monkeypatch.setattr(abort, "_exit", lambda code: calls.append(("exit", code)))
    return calls


def caught(fn):
    try:
        fn()
    except Exception:
        return sys.exc_info()
    raise AssertionError("fn did not raise")


def user_bug():
    raise ValueError("bad batch\nsecond line")


def test_the_hook_reports_then_aborts_every_rank(monkeypatch, capsys, ending):
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    comm, aborted = fake_comm()
    abort.abort_on_exception(comm)
    assert sys.excepthook is not sys.__excepthook__
    sys.excepthook(*caught(user_bug))
    assert aborted == [1]
    assert ending == ["quiet", ("exit", 1)]  # MPI_Abort's own line unshown; no return
    err = capsys.readouterr().err
    assert err.startswith(f"scratchpar: rank 1 of 3 failed outside communication (last "
                          f"operation: {LAST}): ValueError: bad batch\nTraceback")
    assert "in user_bug" in err and "ValueError: bad batch\nsecond line\n" in err
    assert err.endswith("scratchpar: rank 1 ends all 3 ranks (MPI_Abort)\n")


def test_one_rank_keeps_pythons_own_exit(monkeypatch):
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    abort.abort_on_exception(fake_comm(size=1)[0])
    assert sys.excepthook is sys.__excepthook__


def test_the_report_tells_a_failure_inside_the_comm_package(monkeypatch):
    monkeypatch.setenv(watchdog.TIMEOUT_ENV, "soon")  # watchdog.py raises: inside comm
    error = caught(watchdog.default_timeout)
    text = abort.failure_report(fake_comm(last_op=None)[0], *error[1:])
    assert text.startswith("scratchpar: rank 1 of 3 failed in a communication call (last "
                           "operation: none yet): ValueError: SCRATCHPAR_COMM_TIMEOUT must be")


def test_launched_by_mpi_reads_the_launchers_environment(monkeypatch):
    for name in abort.LAUNCHER_ENV:
        monkeypatch.delenv(name, raising=False)
    assert not abort.launched_by_mpi()
    monkeypatch.setenv("PMI_RANK", "0")
    assert abort.launched_by_mpi()


def test_last_op_follows_every_split_and_dup():
    world = Communicator(name="world")
    assert world.size == 1
    world.barrier()
    first = world.last_op
    assert first.startswith("barrier #") and first.endswith(" on world")
    sub = world.split(0, name="world/sub").dup(name="world/sub/dup")
    sub.sendrecv(np.arange(4.0), 0, np.empty(4), 0)
    want = "of shape (4,) float64 to rank 0 on world/sub/dup"
    assert sub.last_op.startswith("send #") and sub.last_op.endswith(want)
    assert world.last_op == sub.last_op  # one record for the family: the hook reads the world


def test_an_mpi_error_names_the_message_and_mpis_reason():
    comm = Communicator(name="world")
    send = comm.isend(np.arange(10.0), 0)  # 80 bytes to a 16-byte buffer: truncated
    with pytest.raises(MessageError, match=r"rank 0 on world: MPI failed\n  recv #\d+ of shape "
                                           r"\(2,\) float64 from rank 0: Message truncated"):
        comm.wait(comm.irecv(np.empty(2), 0))
    comm.wait(send)


def test_a_blocking_message_s_quick_path_names_it_when_mpi_fails_it():
    comm = Communicator(name="world")
    send = comm.isend(np.arange(10.0), 0)
    with pytest.raises(MessageError, match=r"rank 0 on world: MPI failed\n  recv #\d+ of shape "
                                           r"\(2,\) float64 from rank 0: Message truncated"):
        comm.recv(np.empty(2), 0)  # a plain host array: the quick path
    comm.wait(send)


def test_a_blocking_message_s_quick_path_is_recorded_and_watched():
    comm = Communicator(name="world", timeout=0.3).dup(name="watched")  # its stray recv stays
    got = np.empty(3)
    send = comm.isend(np.arange(3.0), 0)
    comm.recv(got, 0)
    comm.wait(send)
    assert comm.last_op.startswith("recv #") and comm.last_op.endswith(
        "of shape (3,) float64 from rank 0 on watched")
    with pytest.raises(WaitTimeout, match=r"waited 0\.\d s on watched: recv #\d+ of shape \(3,\) "
                                          r"float64 from rank 0"):
        comm.recv(got, 0)  # nothing was sent: the watchdog, after the quick path's polling


def test_drain_waits_until_the_pipe_is_read_and_no_longer():
    read_end, write_end = os.pipe()
    with os.fdopen(write_end, "w") as stream, os.fdopen(read_end, "rb") as reader:
        stream.write("report\n")
        stream.flush()
        reading = threading.Timer(0.2, reader.read, args=(7,))
        start = time.perf_counter()
        reading.start()
        abort._drain(stream)
        waited = time.perf_counter() - start
        reading.join()
    assert 0.15 < waited < abort.DRAIN_S  # returned once the reader took the bytes
