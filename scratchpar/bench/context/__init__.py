"""The context benchmark: activations and the longest sequence against cp, balance, traffic."""
