"""Agreement on real ranks: any subset of ranks failing its own checks makes every rank raise the
same RankErrors, with no hang, and the world goes on working afterwards."""

import numpy as np
from device_helpers import host, on_device
from hypothesis import given
from hypothesis import strategies as st
from mpi_helpers import shared_verdict

from scratchpar.comm import collectives
from scratchpar.comm.agree import RankErrors, agreeing


@given(failing=st.sets(st.integers(0, 3)), alike=st.booleans())
@shared_verdict
def test_every_rank_raises_the_same_report_when_any_rank_fails(comm, failing, alike):
    failing = {r for r in failing if r < comm.size}
    message = "a shared problem" if alike else f"rank {comm.rank}'s own problem"
    try:
        with agreeing(comm, (ValueError,)):
            if comm.rank in failing:
                raise ValueError(message)
        lines = None
    except RankErrors as e:
        lines = e.lines()
    everyone = comm.allgather_obj(lines)
    assert all(seen == everyone[0] for seen in everyone)  # the same verdict on every rank
    if not failing:
        assert lines is None
    elif alike:
        assert lines == [line(sorted(failing), comm.size, "a shared problem")]
    else:
        assert lines == [line([r], comm.size, f"rank {r}'s own problem") for r in sorted(failing)]
    # nothing was left unmatched: the next collective works
    assert (host(collectives.all_reduce(comm, on_device(np.ones(3)))) == comm.size).all()


def line(ranks: list[int], size: int, message: str) -> str:
    """The report of ``message`` seen by ``ranks``: prefixed by them unless all ranks saw it."""
    if len(ranks) == size:
        return message
    return f"{'rank' if len(ranks) == 1 else 'ranks'} {', '.join(map(str, ranks))} of {size}: " \
        + message
