"""The timing loop across ranks: every rank learns the slowest rank's seconds, element-wise,
and ranks started together all pass the start."""

from scratchpar.timing import slowest, sync


def test_every_rank_gets_the_element_wise_max_over_ranks(comm):
    mine = [[comm.rank, -comm.rank], [comm.size - comm.rank, 0.5]]  # each column's max differs
    worst = slowest(comm, mine)
    assert worst.tolist() == [[comm.size - 1, 0.0], [comm.size, 0.5]]
    assert comm.allgather_obj(worst.tolist()) == [worst.tolist()] * comm.size


def test_ranks_synced_then_timed_report_one_slowest_figure(comm):
    sync(comm)
    assert float(slowest(comm, [float(comm.rank)])[0]) == comm.size - 1
    assert slowest(comm, 1.5) == 1.5  # a single figure, as a 0-d array
