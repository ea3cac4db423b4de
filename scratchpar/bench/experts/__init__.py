"""The experts benchmark: drops against the capacity factor, balance, and quality per FLOP."""
