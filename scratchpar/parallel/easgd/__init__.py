"""Elastic averaging SGD: workers pulled toward a centre variable, the centre toward them (Zhang,
Choromanska & LeCun 2015)."""

from .asynchronous import AsyncEASGD
from .round_robin import RoundRobinEASGD
from .sync import SyncEASGD

__all__ = ["AsyncEASGD", "RoundRobinEASGD", "SyncEASGD"]
