"""The parameter-server benchmark: the server's bytes against the ring, staleness, loss-time."""
