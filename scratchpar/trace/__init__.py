"""Traces and plots: per-rank event timelines, loss curves, collectives benchmark figures."""
