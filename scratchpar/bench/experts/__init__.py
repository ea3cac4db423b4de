"""The experts benchmark: drops, balance, all-to-all bytes and time, quality per FLOP, memory."""
