"""The pipeline benchmark: bubbles, stashed activations and throughput against formulas."""
