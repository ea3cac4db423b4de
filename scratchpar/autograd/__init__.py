"""Reverse-mode automatic differentiation on NumPy/CuPy arrays."""

from . import functional
from .grad_check import grad_check, numerical_grad
from .operators import install as _install
from .ready import GradReady
from .saved import SavedArrays
from .tensor import Context, Function, Hooks, Tensor, is_grad_enabled, no_grad, recording
from .weights import Weights

_install()

__all__ = ["Context", "Function", "GradReady", "Hooks", "SavedArrays", "Tensor", "Weights",
           "functional", "grad_check", "is_grad_enabled", "no_grad", "numerical_grad",
           "recording"]
