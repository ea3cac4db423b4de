"""The model's parameters as one flat vector of keys, split over S servers in contiguous ranges.

Server s owns keys ``bounds(K, S)[s]`` of the K = Σ sizes keys, as ps-lite's servers own key
ranges (Li et al. 2014, §3.1): a range may start or end inside a parameter, and a small model
may leave a server with no key at all. A worker's push to server s is its gradient's keys in
that range, one contiguous buffer; a pull brings the parameters' keys back the same way.
"""

from __future__ import annotations

from ...backend import get_array_module
from ...comm.chunks import bounds


class KeyRanges:
    """Which keys each of ``servers`` servers owns, over parameters of ``sizes`` elements.

    ``pieces[s]`` lists ``(i, start, stop, offset)``: elements [start, stop) of parameter i's
    flattened array sit at ``offset`` in server s's buffer of ``lengths[s]`` keys."""

    def __init__(self, sizes: list[int], servers: int):
        if servers < 1:
            raise ValueError(f"a parameter server needs at least one server, got {servers}")
        self.sizes, self.servers = list(sizes), servers
        self.ranges = bounds(sum(self.sizes), servers)  # [(first key, past the last), …]
        self.lengths = [stop - start for start, stop in self.ranges]
        self.pieces = [self._pieces(*span) for span in self.ranges]

    def _pieces(self, first: int, last: int) -> list[tuple[int, int, int, int]]:
        out, key = [], 0  # key: the first key of parameter i
        for i, n in enumerate(self.sizes):
            start, stop = max(first, key), min(last, key + n)
            if start < stop:
                out.append((i, start - key, stop - key, start - first))
            key += n
        return out

    def gather(self, arrays: list, server: int):
        """Server ``server``'s keys of ``arrays`` (one per parameter) as one new flat buffer."""
        xp = get_array_module(*arrays)
        out = xp.empty(self.lengths[server], dtype=arrays[0].dtype)  # (K_s,)
        for i, start, stop, offset in self.pieces[server]:
            out[offset:offset + stop - start] = arrays[i].reshape(-1)[start:stop]
        return out

    def scatter(self, flat, arrays: list, server: int) -> None:
        """Write server ``server``'s buffer ``flat`` back into its keys of ``arrays``, in place
        (each array must be contiguous, so that its flat view is the array itself)."""
        for i, start, stop, offset in self.pieces[server]:
            arrays[i].reshape(-1)[start:stop] = flat[offset:offset + stop - start]
