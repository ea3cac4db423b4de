"""Batch size, measured: throughput, the largest batch that fits, the noise scale, steps to a
target (``python -m scratchpar.batch``)."""
