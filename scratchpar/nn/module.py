"""Module and Parameter: named, ordered parameter trees with state dicts and train/eval modes."""

from __future__ import annotations

from collections.abc import Iterator

from ..autograd import Tensor, is_grad_enabled
from ..backend import get_array_module, to_device
from .unfilled import is_unfilled, values


class Parameter(Tensor):
    """A leaf Tensor that a Module owns and an optimizer updates in place."""

    def __init__(self, data):
        super().__init__(data, requires_grad=True)


class Module:
    """Base of every layer and model.

    Parameters and sub-modules are found from the attributes in assignment order, so
    ``named_parameters()`` is deterministic: the same names in the same order on every rank.
    """

    training = True

    def __call__(self, *args, **kwargs):
        hooks = self.__dict__.get("_forward_hooks")
        if hooks is not None:
            hooks[0](self)
        recompute = self.__dict__.get("_recompute")  # nn/recompute.py sets it
        if recompute is not None and is_grad_enabled():
            out = recompute(self, *args)
        else:
            out = self.forward(*args, **kwargs)
        return out if hooks is None else hooks[1](self, out)

    def set_forward_hooks(self, before, after) -> None:
        """Call ``before(module)`` ahead of every forward of this module, and return
        ``after(module, output)`` in place of its output (ZeRO-3 gathers a layer's parameters
        before its forward and frees them after). ``None, None`` removes them."""
        if before is None:
            self.__dict__.pop("_forward_hooks", None)
        else:
            self._forward_hooks = (before, after)

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        yield prefix.rstrip("."), self
        for name, value in vars(self).items():
            if isinstance(value, Module):
                yield from value.named_modules(f"{prefix}{name}.")

    def named_parameters(self) -> Iterator[tuple[str, Parameter]]:
        """Every distinct parameter once, in definition order, with its dotted name."""
        return self._walk("", set())

    def _walk(self, prefix: str, seen: set) -> Iterator[tuple[str, Parameter]]:
        for name, value in vars(self).items():
            if isinstance(value, Parameter) and id(value) not in seen:
                seen.add(id(value))
                yield prefix + name, value
            elif isinstance(value, Module):
                yield from value._walk(f"{prefix}{name}.", seen)

    def parameters(self) -> list[Parameter]:
        return [p for _, p in self.named_parameters()]

    def num_parameters(self) -> int:
        return sum(p.size for p in self.parameters())

    def to_dtype(self, dtype) -> Module:
        """Every parameter's array in ``dtype``, a new array each (before an optimizer holds
        them: the optimizer keeps the arrays it was given)."""
        for _, p in self.named_parameters():
            p.data = p.data.astype(dtype)
        return self

    def train(self, mode: bool = True) -> Module:
        for _, module in self.named_modules():
            module.training = mode
        return self

    def eval(self) -> Module:
        return self.train(False)

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    def state_dict(self) -> dict:
        """Name → the live parameter array (not a copy)."""
        return {name: p.data for name, p in self.named_parameters()}

    def load_state_dict(self, state: dict) -> None:
        """Copy arrays into the parameters in place; names, shapes and dtypes must match."""
        params = dict(self.named_parameters())
        problems = [f"missing {k}" for k in params if k not in state]
        problems += [f"unexpected {k}" for k in state if k not in params]
        for k, p in params.items():
            if k in state and tuple(state[k].shape) != p.shape:
                problems.append(f"{k}: shape {tuple(state[k].shape)} != {p.shape}")
        if problems:
            raise ValueError("state dict does not fit the model: " + "; ".join(problems))
        for k, p in params.items():
            value = values(state[k]) if is_unfilled(state[k]) else state[k]  # drawn, if unfilled
            get_array_module(p.data).copyto(p.data, to_device(value, dtype=p.dtype))


class ModuleList(Module):
    """An ordered list of modules, named ``0``, ``1``, …"""

    def __init__(self, modules):
        for i, module in enumerate(modules):
            setattr(self, str(i), module)

    def __iter__(self) -> Iterator[Module]:
        return (v for v in vars(self).values() if isinstance(v, Module))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __getitem__(self, i: int) -> Module:
        return list(self)[i]


class Sequential(ModuleList):
    """Apply modules one after another."""

    def __init__(self, *modules):
        super().__init__(modules)

    def forward(self, x):
        for module in self:
            x = module(x)
        return x
