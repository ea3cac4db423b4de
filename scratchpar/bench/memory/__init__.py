"""The memory benchmark: mixed precision and recomputation, per rank, beside their formulas."""
