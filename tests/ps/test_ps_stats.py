"""The servers' own figures (parallel/ps/stats.py): bytes counted, the busy fraction of the
serving time, and the other servers' reports gathered on server 0 until the final ones."""

import time

import numpy as np

from scratchpar.parallel.ps.protocol import STATS
from scratchpar.parallel.ps.stats import ServerStats


class Mailbox:
    """A communicator that keeps what is sent and hands out posted receives by hand."""

    def __init__(self):
        self.sent, self.posted = [], []

    def isend(self, buf, dest, tag):
        self.sent.append((buf.copy(), dest, tag))
        return len(self.sent)

    def irecv(self, buf, source, tag):
        self.posted.append((buf, source, tag))
        return len(self.posted)


def test_a_servers_busy_fraction_is_its_serving_time_not_spent_waiting():
    stats = ServerStats(Mailbox(), 0, 1)
    with stats.serving_time():
        with stats.waiting_time():
            time.sleep(0.02)
        time.sleep(0.02)
    stats.count(72)
    stats.count(400)
    stats.report(final=True, sends=[])
    assert 0.2 < stats.busy[0] < 0.8 and stats.bytes[0] == 472
    assert stats.fractions() == [round(stats.busy[0], 4)] and stats.all_reported()
    assert stats.busy_line() == f"busy {100 * stats.busy[0]:.0f}% (server 0)"


def test_server_0_gathers_every_servers_reports_until_the_final_ones():
    mail, inbox = Mailbox(), {}
    zero = ServerStats(mail, 0, 3)
    zero.post(inbox)
    assert sorted(inbox) == [("stats", 1), ("stats", 2)]
    assert [(source, tag) for _, source, tag in mail.posted] == [(1, STATS), (2, STATS)]
    other, sends = ServerStats(Mailbox(), 2, 3), []
    other.count(1000)
    other.report(final=False, sends=sends)
    (report, dest, tag), = other.comm.sent
    assert (dest, tag) == (0, STATS) and len(sends) == 1
    np.testing.assert_array_equal(report, [2, 0.0, 1000, 0.0])  # never served: busy 0
    zero.take(("stats", 2), report, inbox)  # not final: a receive for its next one
    assert zero.bytes[2] == 1000 and ("stats", 2) in inbox and not zero.all_reported()
    zero.take(("stats", 1), np.array([1, 0.5, 64, 1.0]), inbox)
    zero.take(("stats", 2), np.array([2, 0.25, 2000, 1.0]), inbox)
    assert zero.all_reported() and zero.fractions() == [0.0, 0.5, 0.25]
    assert [zero.bytes[s] for s in range(3)] == [0, 64, 2000]
    assert zero.busy_line() == "busy 0%, 50%, 25% (servers 0–2)"
