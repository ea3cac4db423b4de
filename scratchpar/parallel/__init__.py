"""Parallel training strategies; each wraps a single-device model and optimizer."""

from .single import SingleDevice

__all__ = ["SingleDevice"]
