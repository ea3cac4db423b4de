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

from dataclasses import dataclass

from .messages import communication


@dataclass(frozen=True)
class Prediction:
    """One step's predicted seconds, by part."""

    forward_s: float
    backward_s: float
    update_s: float
    communication_s: dict[str, float]  # by the phase it hides behind ("" for none)
    exposed_s: float

    @property
    def step_s(self) -> float:
        return self.forward_s + self.backward_s + self.update_s + self.exposed_s


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
