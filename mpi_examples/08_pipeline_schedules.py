# mpiexec -n 1 python mpi_examples/08_pipeline_schedules.py
"""Pipeline schedules are data: built, printed, timed and checked here without sending a message.

A pipeline cuts the model's layers into p stages, one per rank, and the batch into m
micro-batches. A schedule says what each rank does, in order: ``dict[rank, list[Action]]``, with
``F i`` / ``B i`` the forward / backward of micro-batch i through the rank's stage, ``SEND_ACT``
and ``RECV_ACT`` the activation going down to the next rank, ``SEND_GRAD`` and ``RECV_GRAD`` its
gradient coming back up, ``STEP`` the optimizer update. Plain data can be printed and compared,
and a pure simulator can play every rank's list against the others' before any rank runs one
(09_pipeline_parallel.py then runs them on real ranks). This example is that simulator alone, on
one rank: it needs no messages, and nothing is sent.

The simulator's costs are forward 1 and backward 2 per micro-batch and stage; messages are free
but rendezvous: a send completes only when its receive is reached, as MPI's send of a large
message does (01_point_to_point.py, part 4). That is the worst case, so a schedule that runs in
the simulator cannot deadlock on real ranks.

GPipe (Huang et al. 2019, §2.3) runs every forward, then every backward, then one update: rank s
idles while the first micro-batch travels down and the last comes back, a bubble of
(p−1)/(m+p−1) of the time, and it holds the activations of all m micro-batches at once. 1F1B
(PipeDream-Flush, Narayanan et al. 2021, §2.1) has the same bubble but starts backwards as
early as it can, so rank s never holds more than p − s. Interleaving (§2.2) gives each rank v
chunks of layers, shrinking the bubble to (p−1)/(v·m+p−1) for v times the messages. PipeDream
(Narayanan et al. 2019) is 1F1B with an update after every backward and no flush.
"""

import textwrap

from scratchpar.parallel.pipeline import Action, ScheduleError, check, schedules, simulate
from scratchpar.parallel.pipeline.grid import format_grid
from scratchpar.parallel.pipeline.simulator import bubble_formula

P, M, V = 4, 8, 2  # ranks, micro-batches, chunks per rank (interleaved)
RANK = 1  # whose action list is printed
BUILT = [("GPipe", "gpipe", 1), ("1F1B", "1f1b", 1), ("interleaved", "interleaved", V),
         ("PipeDream", "pipedream", 1)]


def wrapped(actions, indent="    ", width=100):
    """The actions two spaces apart, in lines of at most ``width``, never inside an action."""
    lines = [indent]
    for word in map(str, actions):
        if len(lines[-1]) > len(indent) and len(lines[-1]) + 2 + len(word) > width:
            lines.append(indent)
        lines[-1] += ("  " if len(lines[-1]) > len(indent) else "") + word
    return "\n".join(lines)


def compute_orders(built):
    """Each schedule's compute order on RANK: the messages left out, the order is the schedule."""
    print(f"1. schedules.build for p = {P} ranks, m = {M} micro-batches (interleaved: v = {V} "
          f"chunks);\n   rank {RANK}'s computes in order (F2.1: micro-batch 2 through chunk 1)")
    for label, schedule in built.items():
        computes = [a for a in schedule[RANK] if not a.is_comm]
        print(f"  {label}:\n{wrapped(computes)}")
    print(f"\n  1F1B on rank {RANK} with its messages, {len(built['1F1B'][RANK])} actions "
          "(RECV_ACT 3←0: micro-batch 3 from rank 0;\n  SEND_GRAD 3→0: its gradient back to "
          "rank 0):")
    print(wrapped(built["1F1B"][RANK]))
    print(f"  each a frozen dataclass: schedule[{RANK}][0] == {built['1F1B'][RANK][0]!r}")


def grids(built):
    for label in ("GPipe", "1F1B"):
        print(f"\n2. {label} in time (one column per unit: forward 1, backward 2; · idle)")
        print(textwrap.indent(format_grid(built[label]), "  "))
    print("  Both take 33 units: 1F1B moves the backwards earlier, not the end.")


def bubbles(built):
    print("\n3. bubble (idle fraction) and peak stash (micro-batches whose activations a rank "
          "holds)")
    print(f"  {'schedule':<12} {'simulated':>9}  {'(p−1)/(v·m+p−1)':>15}  {'messages':>8}  "
          f"peak stash, ranks 0..{P - 1}")
    expected = {"GPipe": f"m = {M} on every rank", "1F1B": "p − s",
                "interleaved": "chunks, each half a stage: 2(p−s−1) + (v−1)p + 1",
                "PipeDream": "p − s, and as many weight versions"}
    for label, schedule in built.items():
        t, v = simulate(schedule), 2 if label == "interleaved" else 1
        sends = sum(a.kind.startswith("SEND") for acts in schedule.values() for a in acts)
        peaks = " ".join(f"{t.peak_stash[r]:2d}" for r in range(P))
        print(f"  {label:<12} {t.bubble:9.1%}  {bubble_formula(P, M, v):15.1%}  {sends:8d}  "
              f"{peaks}   ({expected[label]})")


def deadlock():
    """Two ranks, two micro-batches: each rank sends while the other is also sending."""
    def A(kind, mb=None, peer=None):
        return Action(kind, mb, peer=peer)

    rank0 = [A("F", 0), A("SEND_ACT", 0, 1), A("F", 1), A("SEND_ACT", 1, 1),
             A("RECV_GRAD", 0, 1), A("B", 0), A("RECV_GRAD", 1, 1), A("B", 1), A("STEP")]
    rank1 = [A("RECV_ACT", 0, 0), A("F", 0), A("B", 0), A("SEND_GRAD", 0, 0),
             A("RECV_ACT", 1, 0), A("F", 1), A("B", 1), A("SEND_GRAD", 1, 0), A("STEP")]
    print("\n4. a broken schedule, p = 2, m = 2, written by hand with Action")
    for r, acts in enumerate((rank0, rank1)):
        print(f"  rank {r}: {'  '.join(map(str, acts))}")
    try:
        check({0: rank0, 1: rank1})
    except ScheduleError as error:
        print(f"  check() raises ScheduleError:\n{textwrap.indent(str(error), '    ')}")
    print("  Rank 0 sends micro-batch 1 while rank 1 sends the gradient of micro-batch 0: both\n"
          "  wait for a receive the other never reaches. Receiving micro-batch 1 before B0 on\n"
          "  rank 1 lets both sends meet their receives:")
    fixed = [rank1[0], rank1[1], rank1[4], rank1[2], rank1[3], *rank1[5:]]
    print(f"  rank 1: {'  '.join(map(str, fixed))}")
    check({0: rank0, 1: fixed})
    print(f"  check() passes; simulated bubble {simulate({0: rank0, 1: fixed}).bubble:.1%}, "
          f"(p−1)/(m+p−1) = {bubble_formula(2, 2):.1%}")


def main():
    built = {label: schedules.build(name, P, M, v) for label, name, v in BUILT}
    for schedule in built.values():
        check(schedule)  # what schedules.build returns always passes
    compute_orders(built)
    grids(built)
    bubbles(built)
    deadlock()


if __name__ == "__main__":
    main()
