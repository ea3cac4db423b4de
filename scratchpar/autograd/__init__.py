"""Reverse-mode automatic differentiation on NumPy/CuPy arrays."""

from . import functional
from .grad_check import grad_check, numerical_grad
from .operators import install as _install
from .tensor import Context, Function, Tensor, is_grad_enabled, no_grad

_install()

__all__ = ["Context", "Function", "Tensor", "functional", "grad_check", "is_grad_enabled",
           "no_grad", "numerical_grad"]
