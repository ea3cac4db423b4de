"""What a server keeps of its workers: clocks in order, no push lost, staleness as u − v, and a
clock's loss over its finite steps' units."""

import math

import pytest

from scratchpar.parallel.ps.protocol import LEAVE, STEP, Header, ProtocolError
from scratchpar.parallel.ps.records import LossLedger, Roster, Versions


def test_the_roster_refuses_a_clock_out_of_order_and_a_lost_push():
    roster = Roster([2, 3], s=0)
    roster.check(2, Header(STEP, clock=0))
    with pytest.raises(ProtocolError, match="worker rank 3 sent clock 1; server 0 expected 0"):
        roster.check(3, Header(STEP, clock=1))
    roster.clock.update({2: 5, 3: 3})
    assert roster.slowest() == 3
    roster.pushes[3] = 2
    with pytest.raises(ProtocolError, match="applied 2 pushes of worker rank 3, which sent 3"):
        roster.leave(3, Header(LEAVE, pushes=3))
    roster.leave(3, Header(LEAVE, pushes=2))
    assert roster.slowest() == 5
    roster.leave(2, Header(LEAVE, pushes=0))
    assert roster.slowest() == math.inf  # every worker has left


def test_a_push_is_as_stale_as_the_updates_applied_since_the_version_it_read():
    versions = Versions([2, 3])
    versions.computing(2)
    versions.computing(3)
    versions.computing(2)  # a second step before its push: the first one's version stays
    versions.applied([versions.pushed(2)], stepped=True)  # read 0 at version 0: fresh
    versions.pulled[2] = versions.version
    versions.applied([versions.pushed(3)], stepped=True)  # read 0 at version 1
    versions.applied([0, 1], stepped=False)  # a skipped update does not move the version
    assert versions.version == 2
    assert versions.step_staleness() == [0, 1, 2, 1]
    assert versions.step_staleness() == []
    assert versions.staleness_histogram == {0: 1, 1: 2, 2: 1}
    versions.computing(2)
    assert versions.pushed(2) == 1  # computed on the version it pulled last


def test_a_clock_s_loss_is_over_its_finite_steps_units_and_an_overflow_is_no_divergence():
    ledger = LossLedger()
    ledger.record(Header(STEP, clock=0, mean=2.0, units=3))
    ledger.record(Header(STEP, clock=0, mean=math.nan, units=5, overflow=True))
    ledger.record(Header(STEP, clock=0, mean=4.0, units=1))
    loss, skipped, units, overflowed = ledger.close(0)
    assert (loss, skipped, units, overflowed) == ((2.0 * 3 + 4.0) / 4, False, 9, False)
    ledger.record(Header(STEP, clock=1, mean=math.nan, units=4, overflow=True))
    loss, skipped, units, overflowed = ledger.close(1)
    assert math.isnan(loss) and skipped and units == 4 and overflowed
    ledger.record(Header(STEP, clock=2, mean=math.inf, units=4))
    assert ledger.close(2)[1:] == (True, 4, False)  # skipped, and not the loss scale's doing
