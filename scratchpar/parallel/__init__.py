"""Parallel training strategies; each wraps a single-device model and optimizer."""

from .dp import DataParallel, DataParallelNaive
from .local_sgd import LocalSGD
from .pipeline import PipeDream, Pipeline
from .single import SingleDevice

__all__ = ["DataParallel", "DataParallelNaive", "LocalSGD", "PipeDream", "Pipeline", "SingleDevice"]
