"""The step benchmark: one training step against PyTorch eager and a hand-written NumPy floor."""
