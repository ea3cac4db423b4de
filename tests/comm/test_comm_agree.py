"""Agreement before communication, on a stand-in world: every rank learns every rank's problems,
each distinct message once with the ranks that saw it; a bug is not agreed on, it propagates."""

import pytest

from scratchpar.comm.agree import RankErrors, agree, agreeing


class World:
    """Rank ``rank`` of a world whose other ranks found ``found[r]`` (this rank's entry is
    whatever it passes); counts the exchanges."""

    def __init__(self, rank: int, found: list[list[str]]):
        self.rank, self.size, self.found, self.exchanges = rank, len(found), found, 0

    def allgather_obj(self, mine, what):
        self.exchanges += 1
        return [mine if r == self.rank else f for r, f in enumerate(self.found)]


def test_nothing_found_anywhere_passes_on_one_exchange():
    world = World(0, [[], [], []])
    agree(world, [])
    with agreeing(world, (ValueError,)):
        pass
    assert world.exchanges == 2


def test_a_rank_that_found_nothing_still_learns_the_others_problems():
    with pytest.raises(RankErrors) as err:
        agree(World(0, [[], ["rank 1's file is missing"], []]), [])
    assert err.value.lines() == ["rank 1 of 3: rank 1's file is missing"]
    assert err.value.reports == [("rank 1's file is missing", [1])]


def test_each_distinct_message_once_naming_its_ranks_in_rank_order():
    found = [["config bad"], ["config bad", "no GPU"], ["config bad"], ["config bad", "no GPU"]]
    with pytest.raises(RankErrors) as err:
        agree(World(2, found), ["config bad"])
    assert err.value.lines() == ["config bad", "ranks 1, 3 of 4: no GPU"]
    assert str(err.value) == "config bad\nranks 1, 3 of 4: no GPU"


def test_alone_the_process_agrees_with_itself():
    agree(None, [])
    with pytest.raises(RankErrors, match="^bad$"):
        agree(None, ["bad"])


def test_an_expected_error_becomes_this_ranks_problem_and_every_rank_raises():
    world = World(1, [[], [], ["rank 2 too"]])
    with pytest.raises(RankErrors) as err, agreeing(world, (ValueError, MemoryError)):
        raise ValueError("my checkpoint part is missing")
    assert err.value.lines() == ["rank 1 of 3: my checkpoint part is missing",
                                 "rank 2 of 3: rank 2 too"]
    with pytest.raises(RankErrors, match="^out of memory: 8 EiB$"), \
            agreeing(World(0, [[]]), (ValueError, MemoryError)):
        raise MemoryError("8 EiB")


def test_a_bug_is_not_agreed_on_it_propagates_to_the_abort_path():
    world = World(0, [[], []])
    with pytest.raises(KeyError), agreeing(world, (ValueError,)):
        raise KeyError("a bug")
    assert world.exchanges == 0  # no exchange: under MPI the excepthook aborts every rank
