"""The update of the shards a rank owns, on the device: ZeRO without offload."""

from __future__ import annotations

from ...optim import guarded_step


class DeviceUpdate:
    """The rank's optimizer over its shards (one per flat group), on the device."""

    offloaded = False

    def __init__(self, shards, make_optimizer):
        self.shards = shards  # the Shards the optimizer steps, whose grads receive() sets
        self.optimizer = make_optimizer(shards)

    def receive(self, k: int, chunk, copy: bool) -> None:
        """Group k's reduced gradient chunk: a copy, or (``copy=False``) the view of its
        bucket itself, which then lives as long as the chunk."""
        self.shards[k].grad = chunk.copy() if copy else chunk

    def step(self, loss, norm, grad_clip: float) -> dict:
        """Clip and step the shards, unless the loss or the global norm is not finite."""
        return guarded_step(self.optimizer, self.shards, loss, grad_clip, norm)

    def upload(self, k: int) -> None:
        """Nothing to copy: the device stepped its chunks itself."""

    def flush(self) -> None:
        """Nothing pending."""

    def refresh(self) -> None:
        """Nothing to copy: the device's chunks are the optimizer's."""

    def held(self) -> dict[str, list]:
        """The optimizer's state, and the work arrays of its update (one chunk's size)."""
        return {"optimizer": state_arrays(self.optimizer),
                "scratch": self.optimizer.work_arrays()}


def state_arrays(optimizer) -> list:
    """The arrays of an optimizer's per-parameter state (momentum, Adam's moments)."""
    return [v for s in optimizer.state for v in s.values() if hasattr(v, "nbytes")]
