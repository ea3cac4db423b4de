"""Dynamic loss scaling: fp16 gradients that would underflow are carried at S times their size."""

from __future__ import annotations

from ..autograd import Function, Tensor


class LossScaler:
    """The loss scale S and its schedule (Micikevicius et al. 2018, §3.2; the dynamic rule of
    PyTorch's GradScaler and Megatron's DynamicGradScaler).

    fp16 holds no magnitude below 2⁻²⁴, and many activation gradients are smaller: backward
    starts from S instead of 1, so every gradient is S times its size, and the update divides by
    S in fp32. A step whose gradient overflowed (inf or nan) is skipped and S halved; after
    ``growth_interval`` applied steps in a row, S doubles. At ``min_scale`` an overflow is no
    longer the scale's fault: it is counted as divergence.
    """

    def __init__(self, scale: float = 2.0**16, growth_interval: int = 2000,
                 min_scale: float = 1.0):
        if not scale >= min_scale > 0:
            raise ValueError(f"need scale >= min_scale > 0, got {scale} and {min_scale}")
        if growth_interval < 1:
            raise ValueError(f"growth_interval must be >= 1, got {growth_interval}")
        self.scale, self.growth_interval, self.min_scale = float(scale), growth_interval, \
            float(min_scale)
        self.clean = 0  # steps applied since the last overflow or growth

    def applied(self) -> None:
        """A step was applied: after ``growth_interval`` of them in a row, double S."""
        self.clean += 1
        if self.clean == self.growth_interval:
            self.scale *= 2.0
            self.clean = 0

    def overflowed(self) -> bool:
        """The gradient was not finite: halve S (not below ``min_scale``). Whether the scale
        takes the blame: ``False`` where S was already at its floor."""
        self.clean = 0
        if self.scale <= self.min_scale:
            return False
        self.scale = max(self.scale * 0.5, self.min_scale)
        return True

    def state_dict(self) -> dict:
        return {"scale": self.scale, "clean": self.clean}

    def load_state_dict(self, state: dict) -> None:
        scale, clean = float(state["scale"]), int(state["clean"])
        if not scale >= self.min_scale or not 0 <= clean < self.growth_interval:
            raise ValueError(f"loss scaler state out of range: scale {scale}, clean {clean}")
        self.scale, self.clean = scale, clean


class ScaleGrad(Function):
    """y = x; dy/dx = S. Applied to the loss, backward starts from S (§3.2) while the loss
    reported stays the loss."""

    @staticmethod
    def forward(ctx, x, scale: float):
        ctx.scale = scale
        return x

    @staticmethod
    def backward(ctx, g):
        return g * ctx.scale


def scaled(loss: Tensor, scaler: LossScaler | None) -> Tensor:
    """``loss`` whose backward carries ``scaler``'s S (itself where there is no scaler)."""
    return loss if scaler is None else ScaleGrad.apply(loss, scaler.scale)
