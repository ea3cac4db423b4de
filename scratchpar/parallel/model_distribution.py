"""Model distribution: a model's layers spread over the ranks, one batch in flight at a time."""

from __future__ import annotations

from ..comm.mesh import Mesh
from .pipeline import Pipeline, partition, schedules
from .pipeline.partition import parameter_counts


class ModelDistribution(Pipeline):
    """Rank r of ``comm`` holds the r-th of ``comm.size`` contiguous ranges of the model's
    ``pipeline_layers()``, balanced by parameter count, and nothing else. The batch goes down
    the ranks forward and back up them backward, so one rank computes at a time (Huang et al.
    2019, GPipe, Fig. 2b: the model-parallel baseline that micro-batches then fill). It is the
    naive schedule of :class:`~scratchpar.parallel.pipeline.Pipeline` on a mesh of one
    pipeline, which this strategy lays out and frees itself."""

    def __init__(self, model, make_optimizer, task, comm, grad_clip: float = 0.0):
        self.own_mesh = Mesh(comm, dp=1, pp=comm.size, tp=1)
        ranges = partition(parameter_counts(model.pipeline_layers()), comm.size)
        super().__init__(model, make_optimizer, task, self.own_mesh, schedules.naive(comm.size),
                         ranges, grad_clip)

    @classmethod
    def describe(cls, shape, world: int, rows: int = 0):
        """The naive schedule's figures on a pipeline of ``world`` stages, one micro-batch."""
        return Pipeline.describe(shape, world, pp=world, m=1, rows=rows)

    def close(self) -> None:
        """Collective: free the strategy's communicators and its mesh."""
        super().close()
        self.own_mesh.free()
