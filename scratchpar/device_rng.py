"""Random numbers drawn on the device, from a stream whose whole state is two integers.

SplitMix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number generators", OOPSLA
2014) is counter-based: its n-th output is a fixed mix of ``key + n·γ``. So draw n values is
n independent elementwise mixes of positions, one vectorized pass on NumPy, CuPy or the double,
with no generator object living on the device. The stream is (key, position): a checkpoint
saves it as two integers and resumes mid-run, and a CPU run and a GPU run of the same seed draw
the same dropout masks, bit for bit.

A step replayed as a CUDA graph (``kernels/graph.py``) cannot take a new position as a kernel's
argument: the graph keeps the number it was captured with. So a stream may count from an
``origin`` held in device memory: each draw's position is then ``origin + position``, and the
host moves the origin, not the kernels' arguments, from one replay to the next.
"""

from __future__ import annotations

import math

import numpy as np

GAMMA = np.uint64(0x9E3779B97F4A7C15)  # ⌊2⁶⁴/φ⌋, odd: key + n·γ visits every 64-bit value
MIX1, MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)  # the paper's mix
SHIFTS = tuple(np.uint64(s) for s in (30, 27, 31, 11))
UNIT = 2.0 ** -53  # 53 random bits → a float64 in [0, 1)
LIMIT = 2 ** 64


class DeviceRandom:
    """Uniform floats on any device from the stream (``seed``, ``*stream``): extra integers
    (a rank, a purpose) give independent streams, as ``backend.rng`` does on the host."""

    def __init__(self, seed: int, *stream: int):
        key = np.random.SeedSequence([seed, *stream]).generate_state(1, np.uint64)[0]
        self.key, self.position = int(key), 0
        self.origin = None  # a device uint64 0-d array the positions count from, or None: 0

    def random(self, shape, xp=np):
        """``shape`` floats in [0, 1) as an array of ``xp``; the stream moves past them."""
        n = math.prod(shape)
        out = self.at(xp.arange(n, dtype=xp.uint64), xp).reshape(shape)
        self.position += n
        return out

    def keep(self, shape, p: float, xp=np):
        """``random(shape, xp) >= p`` (a dropout mask), the stream moved alike."""
        n = math.prod(shape)
        out = self.keep_at(xp.arange(n, dtype=xp.uint64), p).reshape(shape)
        self.position += n
        return out

    def keep_at(self, offsets, p: float):
        """``at(offsets) >= p`` without the float64 draw: the 53 bits against ⌈p·2⁵³⌉, the same
        test exactly, since a float of 53 bits times 2⁻⁵³ is exact."""
        return self._bits(offsets) >= np.uint64(math.ceil(p * 2 ** 53))

    def at(self, offsets, xp=np):
        """The floats that :meth:`random` would draw at ``offsets`` (a uint64 array) past the
        stream's position, each alone; the stream does not move. A slice of a larger draw costs
        only the slice."""
        return self._bits(offsets).astype(xp.float64) * UNIT

    def _bits(self, offsets):
        """53 random bits (uint64) at ``offsets`` past the stream's position."""
        z = offsets + np.uint64((self.position + 1) % LIMIT)  # the n-th output mixes key + n·γ
        if self.origin is not None:
            z += self.origin  # read on the device: a replayed graph's draws move with it
        z *= GAMMA  # arithmetic mod 2⁶⁴: the state after n steps of +γ
        z += np.uint64(self.key)
        z ^= z >> SHIFTS[0]
        z *= MIX1
        z ^= z >> SHIFTS[1]
        z *= MIX2
        z ^= z >> SHIFTS[2]
        z >>= SHIFTS[3]
        return z

    @property
    def state(self) -> dict:
        """The whole stream, as JSON-able integers."""
        return {"key": self.key, "position": self.position}

    @state.setter
    def state(self, state: dict) -> None:
        if not isinstance(state, dict) or set(state) != {"key", "position"}:
            raise ValueError(f"a random stream's state is {{'key', 'position'}}, got {state!r}")
        key, position = state["key"], state["position"]
        for name, value in (("key", key), ("position", position)):
            if type(value) is not int or not 0 <= value < LIMIT:
                raise ValueError(f"a random stream's {name} must be an integer in [0, 2⁶⁴), "
                                 f"got {value!r}")
        self.key, self.position = key, position
