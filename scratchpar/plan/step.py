"""A data-parallel step's time on a cluster: compute, the update, and the communication that
its compute does not hide.

For the strategies whose every rank runs the whole model on its share of the batch (DP, naive
DP, local SGD, ZeRO 1–3 and synchronous EASGD), one step on ⌈B/p⌉ rows is

    t = t_forward + t_backward + t_update + exposed,
    t_forward, t_backward: the rank's compute on its rows              (plan/compute.py)
    t_update = bytes the optimizer reads and writes / bandwidth
    exposed = max(0, c_forward − t_forward) + max(0, c_backward − t_backward) + c_exposed

with c_phase the seconds of the messages the strategy's description hides behind that phase
(plan/messages.py): DP's buckets run behind backward (Li et al. 2020, §3.2), ZeRO-3's gathers
behind forward. The compute comes from FLOP at the device's rate for a machine that is not
here, or is measured on this one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..parallel.pipeline.simulator import chunks, micro_batches, simulate
from .messages import communication


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
    update = update_bytes(description.holds) / profile.device.bytes_per_s
    return Prediction(forward, backward, update, phases, exposed)


def pipeline(description, schedule, compute: tuple[float, float], message_s: float, ranks: dict,
             profile, across_nodes: frozenset[str] = frozenset()) -> Prediction:
    """The step of a pipeline: ``schedule`` (stage → actions) timed by the schedule simulator
    with ``compute`` = (forward, backward) seconds of one micro-batch through a rank's share
    of the model, each chunk's followed by its boundary message of ``message_s`` seconds; then the
    replicas' gradient all-reduce and the loss's, exposed after the flush (the pipeline's
    description, ``ranks`` its axes' sizes), and the stage's update. Its idle time is the
    bubble, (p−1)/(m+p−1) of the makespan with uniform stages (Huang et al. 2019, §2.3).

    A hybrid's tensor-parallel collectives (the ``tp`` axis) sit inside each slot: Megatron's
    all-reduces wait for the matmul before them and the next one waits for them (Shoeybi et
    al. 2019, §3), so they lengthen the slot's compute rather than hide behind it."""
    m = micro_batches(schedule)
    inline = communication(_only(description, "tp"), ranks, profile, across_nodes)
    forward = compute[0] + inline.get("forward", 0.0) / m
    backward = compute[1] + inline.get("backward", 0.0) / m
    v = chunks(schedule)  # each chunk's action sends its own boundary message
    timeline = simulate(schedule, forward + v * message_s, backward + v * message_s)
    phases = communication(_only(description, "dp", "world"), ranks, profile, across_nodes)
    update = update_bytes(description.holds) / profile.device.bytes_per_s
    tensor = sum(inline.values())  # exposed inside the slots
    return Prediction(m * compute[0], m * compute[1], update, {**phases, **{
        f"tp {phase}": t for phase, t in inline.items()}}, sum(phases.values()) + tensor,
        idle_s=timeline.makespan - m * (compute[0] + compute[1]) - tensor)


def _only(description, *axes: str):
    """The description with only the messages on ``axes``."""
    return dataclasses.replace(description, sends=tuple(
        s for s in description.sends if s.axis in axes))
