"""Benchmarks that print side-by-side tables: ``python -m scratchpar.bench <name>``."""
