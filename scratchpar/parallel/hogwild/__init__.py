"""Hogwild (Niu et al. 2011): lock-free SGD on one parameter vector, where that vector lives, and
the locked spec beside it."""

from .locked import LockedHogwild
from .stores import RemoteStore, SharedStore
from .strategy import Hogwild

__all__ = ["Hogwild", "LockedHogwild", "RemoteStore", "SharedStore"]
