"""The model's parameters as one flat vector of keys, split over S servers in contiguous ranges.

Server s owns keys ``bounds(K, S)[s]`` of the K = Σ sizes keys, as ps-lite's servers own key
ranges (Li et al. 2014, §3.1): a range may start or end inside a parameter, and a small model
may leave a server with no key at all. A worker's push to server s is its gradient's keys in
that range, one contiguous buffer. A pull brings the parameters' keys back the same way.
"""

from __future__ import annotations

from ...comm.flat import Layout


class KeyRanges:
    """Which keys each of ``servers`` servers owns, over parameters of ``sizes`` elements: the
    chunks of their :class:`~scratchpar.comm.flat.Layout` over the servers.

    ``ranges[s]`` is server s's (first key, past the last). ``pieces[s]`` lists ``(i, start,
    stop, offset)``: elements [start, stop) of parameter i's flattened array sit at ``offset``
    in server s's buffer of ``lengths[s]`` keys."""

    def __init__(self, sizes: list[int], servers: int):
        if servers < 1:
            raise ValueError(f"a parameter server needs at least one server, got {servers}")
        self.sizes, self.servers = list(sizes), servers
        self.chunks = Layout([(n,) for n in self.sizes]).chunks(servers)  # one per server
        self.ranges = [(c.lo, c.hi) for c in self.chunks]
        self.lengths = [c.size for c in self.chunks]
        self.pieces = [c.pieces for c in self.chunks]

    def gather(self, arrays: list, server: int):
        """Server ``server``'s keys of ``arrays`` (one per parameter) as one new flat buffer."""
        return self.chunks[server].gather(arrays)  # (K_s,)

    def scatter(self, flat, arrays: list, server: int) -> None:
        """Write server ``server``'s buffer ``flat`` back into its keys of ``arrays``, in place
        (each array must be contiguous, so that its flat view is the array itself)."""
        self.chunks[server].scatter(flat, arrays)
