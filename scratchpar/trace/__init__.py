"""Traces and plots: per-rank event timelines, loss curves from metrics files."""
