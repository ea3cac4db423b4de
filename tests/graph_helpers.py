"""A stand-in CUDA graph for the CPU (``kernels/graph.py``'s :class:`Replayed`): capture runs
the work on copies of the inputs, and a replay runs it again on them and writes its results into
the captured outputs, as a real graph rewrites the arrays it was captured with. A real capture
records without running, and the replay that follows it runs the work once; here the capture's
run is that replay, so a step with side effects (an update) happens once a call, as on a GPU.
A real graph runs under ``--device cuda`` (docs/devices.md)."""

import numpy as np

from scratchpar.kernels import graph


class StandIn(graph.Replayed):
    """A graph that replays by running the work again and writing into the captured arrays."""

    launches = 0

    def capture(self, inputs):
        self.inputs = tuple(a.copy() for a in inputs)
        self.outputs = _held(self.run(self.inputs))
        self.graph, self.unlaunched = "recorded", True
        self.captures += 1

    def launch(self):
        StandIn.launches += 1
        if self.unlaunched:  # the capture's run was this replay's
            self.unlaunched = False
            return
        fresh = self.run(self.inputs)
        for mine, new in zip(arrays([self.outputs]), arrays([fresh])):
            mine[...] = new


def _held(outputs):
    """The work's outputs as arrays a replay can write into (CuPy's sums are 0-d arrays)."""
    if isinstance(outputs, list):
        return [_held(out) for out in outputs]
    if isinstance(outputs, tuple):
        return tuple(_held(out) for out in outputs)
    scalar = isinstance(outputs, np.generic) or not hasattr(outputs, "shape")
    return np.asarray(outputs) if scalar else outputs


def arrays(outputs):
    """Every array of the work's outputs, nested lists and tuples flattened in order."""
    for out in outputs:
        yield from (arrays(out) if isinstance(out, list | tuple) else [out])
