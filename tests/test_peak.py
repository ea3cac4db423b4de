"""``scratchpar.peak``: the most bytes a block holds at once, counted from zero at its start."""

from scratchpar.backend import xp_default
from scratchpar.peak import Peak, peak_bytes


def test_the_peak_is_the_largest_moment_not_the_sum():
    xp = xp_default()  # the test's device
    before = xp.ones(1 << 20)  # 8 MiB made before the block: not counted, even when freed
    with peak_bytes() as seen:
        del before
        a = xp.ones(1 << 19)  # 4 MiB
        b = xp.ones(1 << 19)  # 8 MiB held
        del a, b
        c = xp.ones(1 << 18)  # 2 MiB
    assert 8 << 20 <= seen.bytes < (8 << 20) + (64 << 10), seen.bytes
    assert (2 << 20) <= seen.live < (2 << 20) + (64 << 10), seen.live
    del c


def test_the_device_count_adds_what_is_asked_and_subtracts_by_pointer():
    seen = Peak()
    seen.allocated(pointer=1, size=100)
    seen.allocated(pointer=2, size=50)
    seen.freed(1)
    seen.freed(7)  # made before the block: ignored
    seen.allocated(pointer=1, size=30)  # the pool hands the same memory out again
    assert (seen.live, seen.bytes) == (80, 150)
