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
  (a loss scale) in the key, and a new key captures again, or passes it in device memory as an
  input (a random stream's origin: ``device_rng.py``). The work must not wait for the device or
  copy to or from the host (the device double holds a step to that:
  ``tests/double/test_double_training.py``);
- a replay runs none of the work's Python: what it would have counted on the host (the draws of
  a random stream) the caller counts, from a call that ran it (``ran``).
"""

from __future__ import annotations


class Replayed:
    """``work(*inputs)``, replayed as a CUDA graph from its second call with the same key: the
    inputs' shapes and dtypes, and ``extra``, the host numbers the work's kernels take."""

    def __init__(self, work):
        self.work = work
        self.key = self.graph = None
        self.inputs = self.outputs = self.pool = None
        self.captures = 0
        self.ran = False  # whether the last call ran the work's Python (uncaptured, or captured)

    def __call__(self, inputs: tuple, extra: tuple = ()):
        key = (tuple((a.shape, a.dtype.str) for a in inputs), extra)
        self.ran = key != self.key or self.graph is None
        if key != self.key:  # new shapes or numbers: run as it is, capture at the next call
            self.key, self.graph, self.inputs, self.outputs, self.pool = key, None, None, None, None
            return self.work(*inputs)
        if self.graph is None:
            self.capture(inputs)
        for mine, given in zip(self.inputs, inputs):
            mine[...] = given  # on the device, in the stream's order
        self.launch()
        return self.outputs

    def capture(self, inputs: tuple) -> None:
        """Record ``work`` on copies of ``inputs`` into a graph, its memory its own pool's."""
        import cupy

        self.pool = cupy.cuda.MemoryPool()
        stream = cupy.cuda.get_current_stream()
        with cupy.cuda.using_allocator(self.pool.malloc):
            self.inputs = tuple(a.copy() for a in inputs)
            stream.begin_capture()  # relaxed: the pool may allocate while capturing
            try:
                self.outputs = self.work(*self.inputs)
            finally:
                self.graph = stream.end_capture()
        self.captures += 1

    def launch(self) -> None:
        """Replay the graph on the current stream."""
        import cupy

        self.graph.launch(stream=cupy.cuda.get_current_stream())
