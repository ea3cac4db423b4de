"""Parallel training strategies; each wraps a single-device model and optimizer."""

from .dp import DataParallel, DataParallelNaive
from .local_sgd import LocalSGD
from .single import SingleDevice

__all__ = ["DataParallel", "DataParallelNaive", "LocalSGD", "SingleDevice"]
