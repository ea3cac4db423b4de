"""Elastic averaging SGD: workers pulled toward a centre variable, the centre toward them (Zhang,
Choromanska & LeCun 2015)."""

from .sync import SyncEASGD

__all__ = ["SyncEASGD"]
