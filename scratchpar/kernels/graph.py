"""A step's device work as a CUDA graph: captured once its shapes are fixed, then replayed
(CUDA C++ Programming Guide, "CUDA Graphs"; CuPy's stream capture), so that the host's cost of
a step no longer grows with the ops it launches.

A graph replays its kernels with the arguments and the memory they were captured with. So:

- the work runs once uncaptured on new shapes (it builds what it caches: a causal mask), and is
  captured at its second call with the same ones;
- the inputs are copied into the captured inputs before each replay, and the outputs are the
  captured arrays, the same ones each time, rewritten by each replay;
- what the work allocates comes from a memory pool of the graph's own, which nothing else takes
  between replays;
- a number the host passes into a kernel is fixed at capture: the caller puts every such number
  (a loss scale) in the key, and a new key captures again. The work must not wait for the device
  or copy to or from the host (the device double holds a step to that:
  ``tests/double/test_double_training.py``);
- a random stream's position is such a number, moved by every step. So a work that draws
  (dropout) names its ``stream``: the position goes in as one more input, the origin its draws
  count from in device memory (``device_rng.py``), and since a replay runs none of the work's
  Python, the position is moved past the draws counted when the work last ran.
"""

from __future__ import annotations

import numpy as np

from ..backend import BackendError, get_array_module
from ..device_rng import LIMIT


class Replayed:
    """``work(*inputs)``, replayed as a CUDA graph from its second call with the same key: the
    inputs' shapes and dtypes, and ``extra``, the host numbers the work's kernels take. Its
    draws from ``stream`` (a :class:`~scratchpar.device_rng.DeviceRandom`), if named, are the
    ones the work would draw uncaptured."""

    def __init__(self, work, stream=None):
        self.work, self.stream = work, stream
        self.key = self.graph = None
        self.inputs = self.outputs = self.pool = None
        self.captures = 0
        self.ran = False  # whether the last call ran the work's Python (uncaptured, or captured)
        self.draws = 0  # the work's draws from its stream, counted when it last ran

    def __call__(self, inputs: tuple, extra: tuple = ()):
        if self.stream is None:
            return self._replayed(inputs, extra)
        start, self.stream.position = self.stream.position, 0
        origin = get_array_module(inputs[0]).asarray(np.array(start, np.uint64))  # (), a copy
        try:
            out = self._replayed((*inputs, origin), extra)
        except BaseException:
            self.stream.position = start  # a step that did not happen draws nothing
            raise
        self.draws = self.stream.position if self.ran else self.draws
        self.stream.position = (start + self.draws) % LIMIT
        return out

    def _replayed(self, inputs: tuple, extra: tuple):
        key = (tuple((a.shape, a.dtype.str) for a in inputs), extra)
        self.ran = key != self.key or self.graph is None
        if key != self.key:  # new shapes or numbers: run as it is, capture at the next call
            self.key, self.graph, self.inputs, self.outputs, self.pool = key, None, None, None, None
            return self.run(inputs)
        if self.graph is None:
            self.capture(inputs)
        for mine, given in zip(self.inputs, inputs):
            mine[...] = given  # on the device, in the stream's order
        self.launch()
        return self.outputs

    def run(self, inputs: tuple):
        """The work on ``inputs``, the last of them its stream's origin where it draws."""
        if self.stream is None:
            return self.work(*inputs)
        self.stream.origin = inputs[-1]
        try:
            return self.work(*inputs[:-1])
        finally:
            self.stream.origin = None

    def capture(self, inputs: tuple) -> None:
        """Record ``work`` on copies of ``inputs`` into a graph, its memory its own pool's."""
        if not all(type(a).__module__.startswith("cupy") for a in inputs):
            raise BackendError("a CUDA graph records CuPy's kernels: capture a step on "
                               "--device cuda")
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()  # the uncaptured run's cached blocks:
        self.pool = cupy.cuda.MemoryPool()  # the graph's pool takes their place, not beside them
        stream = cupy.cuda.get_current_stream()
        with cupy.cuda.using_allocator(self.pool.malloc):
            self.inputs = tuple(a.copy() for a in inputs)
            stream.begin_capture()  # relaxed: the pool may allocate while capturing
            try:
                self.outputs = self.run(self.inputs)
            finally:
                self.graph = stream.end_capture()
        self.captures += 1

    def launch(self) -> None:
        """Replay the graph on the current stream."""
        import cupy

        self.graph.launch(stream=cupy.cuda.get_current_stream())
