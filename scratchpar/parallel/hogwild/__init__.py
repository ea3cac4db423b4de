"""Hogwild (Niu et al. 2011): lock-free SGD on one parameter vector, and where that vector lives."""

from .stores import RemoteStore, SharedStore
from .strategy import Hogwild

__all__ = ["Hogwild", "RemoteStore", "SharedStore"]
