"""A data-parallel step's time on a cluster: compute, the update, and the communication that
its compute does not hide.

For the strategies whose every rank runs the whole model on its share of the batch (DP, naive
DP, local SGD, ZeRO 1–3 and synchronous EASGD), one step on ⌈B/p⌉ rows is

    t = t_forward + t_backward + t_update + exposed,
    t_forward, t_backward: the rank's compute on its rows              (plan/compute.py)
    t_update = bytes the optimizer reads and writes / bandwidth + arrays · the engine's per array
    exposed = max(0, c_forward − t_forward) + max(0, c_backward − t_backward) + c_exposed

with c_phase the seconds of the messages the strategy's description hides behind that phase
(plan/messages.py): DP's buckets run behind backward (Li et al. 2020, §3.2), ZeRO-3's gathers
behind forward. The compute comes from FLOP at the device's rate for a machine that is not
here, or is measured on this one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..parallel.pipeline import steady
from ..parallel.pipeline.actions import splits_backward
from ..parallel.pipeline.simulator import makespan_eager
from .messages import communication

Flags = tuple[str, int, int, int, tuple]  # a schedule as named: (name, p, m, v, costs)


@dataclass(frozen=True)
class Prediction:
    """One step's predicted seconds, by part."""

    forward_s: float
    backward_s: float
    update_s: float
    communication_s: dict[str, float]  # by the phase it hides behind ("" for none)
    exposed_s: float
    idle_s: float = 0.0  # a pipeline's makespan beyond its compute: the bubble, the messages
    sent_bytes: float = 0.0  # what a rank sends, the algorithms' own factors included

    @property
    def step_s(self) -> float:
        return self.forward_s + self.backward_s + self.update_s + self.exposed_s + self.idle_s


def update_bytes(holds: dict[str, int]) -> int:
    """Bytes an elementwise optimizer moves per step: it reads the parameters, the gradient
    and its state, and writes the parameters and the state back."""
    return 2 * holds["parameters"] + holds["gradients"] + 2 * holds["optimizer"]


def update_s(description, profile) -> float:
    """Seconds of the update of a rank the description describes: its bytes at the device's
    bandwidth, and the engine's own cost of each array it steps (a call per op on each)."""
    return (update_bytes(description.holds) / profile.device.bytes_per_s
            + description.arrays * profile.engine.array_s)


def data_parallel(description, compute: tuple[float, float], ranks: int, profile,
                  across_nodes: bool = False) -> Prediction:
    """The step of a strategy that splits the batch over ``ranks`` ranks on the dp axis,
    each running the whole model on its rows in ``compute`` = (forward, backward) seconds
    (``description``: the strategy's own, for that world)."""
    forward, backward = compute
    phases = communication(description, {"dp": ranks, "world": ranks}, profile,
                           frozenset({"dp", "world"}) if across_nodes else frozenset())
    exposed = (max(0.0, phases.get("forward", 0.0) - forward)
               + max(0.0, phases.get("backward", 0.0) - backward) + phases.get("", 0.0))
    update = update_s(description, profile)
    return Prediction(forward, backward, update, phases, exposed)


def even(compute: tuple[float, float], p: int, v: int) -> list[tuple[float, float]]:
    """The virtual stages of ``p`` ranks of ``v`` chunks each, a rank's share of the compute,
    ``compute`` = (forward, backward), split evenly among its chunks."""
    return [(compute[0] / v, compute[1] / v)] * (p * v)


def pipeline(description, schedule: Flags, stages: list[tuple[float, float]], message_s: float,
             ranks: dict, profile, across_nodes: frozenset[str] = frozenset(),
             weight: float = 0.0) -> Prediction:
    """The step of a pipeline: the compute orders of the schedule its flags ``schedule`` =
    (name, p, m, v, costs) build, timed as the runtime runs it (``simulator.makespan_eager``;
    at many micro-batches from a few, ``steady.py``), each F and B of chunk c on rank r
    costing virtual stage k = c·p + r's seconds in ``stages`` (forward, backward of one
    micro-batch), followed by its boundary message of ``message_s`` seconds; then the
    replicas' gradient all-reduce and the loss's, exposed after the flush (the pipeline's
    description, ``ranks`` its axes' sizes), and the stage's update. Its idle time is the
    busiest rank's wait: the bubble, (p−1)/(m+p−1) of the makespan with uniform stages (Huang
    et al. 2019, §2.3), more where stages differ.
    Where the schedule splits backward, its W takes the share ``weight`` of it and B the rest.

    A hybrid's tensor-parallel collectives (the ``tp`` axis) sit inside each slot: Megatron's
    all-reduces wait for the matmul before them and the next one waits for them (Shoeybi et
    al. 2019, §3), so they lengthen the slot's compute rather than hide behind it. So do its
    context-parallel ones (``cp``): the ring's could hide behind the block in hand (Liu et al.
    2023, §3), which this prices as exposed, an upper bound. So do a sparse layer's
    all-to-alls (``ep``): the experts wait for their tokens, and the next block for theirs."""
    _, p, m, v, _ = schedule
    inline = communication(_only(description, "tp", "cp", "ep"), ranks, profile, across_nodes)
    beside = {"F": inline.get("forward", 0.0) / (m * v) + message_s,
              "B": inline.get("backward", 0.0) / (m * v) + message_s}

    def timed(orders) -> tuple[float]:
        split = weight if splits_backward(orders) else 0.0

        def cost(r: int, action) -> float:
            if action.kind not in ("F", "B", "W"):  # STEP priced apart, messages in F and B
                return 0.0
            forward, backward = stages[action.chunk * p + r]
            if action.kind == "W":
                return split * backward
            return (forward if action.kind == "F" else (1 - split) * backward) + beside[
                action.kind]

        return (makespan_eager(orders, cost),)

    mine = [[stages[c * p + r] for c in range(v)] for r in range(p)]
    busiest = max(mine, key=lambda chunks_of: sum(f + b for f, b in chunks_of))
    rate = sum(f + b + beside["F"] + beside["B"] for f, b in busiest)  # a micro-batch's pace
    (makespan,) = steady.at(timed, [rate], *schedule)
    forward, backward = m * sum(f for f, _ in busiest), m * sum(b for _, b in busiest)
    phases = communication(_only(description, "dp", "dp×cp", "world"), ranks, profile,
                           across_nodes)
    update = update_s(description, profile)
    tensor = sum(inline.values())  # exposed inside the slots
    inside = "+".join(["tp", *sorted({s.axis for s in description.sends} & {"cp", "ep"})])
    return Prediction(forward, backward, update, {**phases, **{
        f"{inside} {phase}": t for phase, t in inline.items()}}, sum(phases.values()) + tensor,
        idle_s=max(makespan - forward - backward - tensor, 0.0))  # rounding kept above 0


def _only(description, *axes: str):
    """The description with only the messages on ``axes``."""
    return dataclasses.replace(description, sends=tuple(
        s for s in description.sends if s.axis in axes))
