"""The ZeRO benchmark: bytes per rank against the formula, step time against DP, offload."""
