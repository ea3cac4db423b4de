"""The memory of the sparse problems' runs: their models (a lookup and a sum) and data sources."""

from __future__ import annotations

from ..data.sparse_logreg import CHUNK_ENTRIES
from ..parallel.description import Shape
from .memory_models import F64, I64, NODE_BYTES, Model, draw, moments
from .memory_sources import Source

# Features a sample draws, per non-zero, to find nnz distinct ones: measured 2-6 for most
# shapes, up to 10 for the densest (2 of 4 features, over 32,768 samples)
CANDIDATES = 10
# Bytes per non-zero while samples are drawn: per candidate its id, its sort order, the sorted
# ids and two masks; per kept non-zero six float64 arrays (term counts, tf, idf, tf-idf, the
# normalized values, the logit's cast) and the float32 values
SAMPLER = CANDIDATES * (3 * I64 + 2) + 6 * F64 + 4


def sparse_model(cfg, s: int, rows: int, evaluated: int) -> Model:
    """Logistic regression over ``n_features`` weights, or factor tables of ``rank`` columns;
    a step on ``rows`` samples, an evaluation on ``evaluated``."""
    d = cfg.data
    if cfg.model.kind == "logreg":
        k, cast = d.nnz, F64 * (s == F64)  # float32 values meet float64 weights: a cast copy
        # kept: the gathered weights, their product with the values (cast); backward: the
        # product's and the gathered weights' (B, nnz) gradients; ten (B,) arrays in the sum,
        # the bias and the loss; seven recorded ops
        step = rows * (k * (4 * s + cast) + 10 * s) + 8 * NODE_BYTES
        evaluation = evaluated * (k * (2 * s + cast) + 8 * s)
        n = d.n_features + 1  # the weights and the bias: one lookup and a sum, no layers
        shape = Shape(n, s, moments(cfg), d.n_features, 2, shared=n, sizes=(d.n_features, 1))
        return Model(shape, draw(s, d.n_features), step, evaluation)
    r = d.rank
    largest = max(d.n_users, d.n_items) * r
    # kept: the two gathered (B, rank) rows and their product; backward: the product's and each
    # table's (B, rank) gradients and each gather's int64 flat indices; the (B,) residuals
    step = rows * (r * (6 * s + 2 * I64) + 8 * s) + 8 * NODE_BYTES
    evaluation = evaluated * (3 * r * s + 4 * s)
    n = (d.n_users + d.n_items) * r  # the two factor tables: lookups, no layers
    return Model(Shape(n, s, moments(cfg), largest, 2, shared=n,
                       sizes=(d.n_users * r, d.n_items * r)), draw(s, largest), step, evaluation)


def sparse_source(cfg) -> Source:
    """SparseLogistic's popularity, CDF, idf and true weights, and the chunks of samples that
    estimate its floor; or LowRankRatings' true factors. Then the batches drawn."""
    d, b = cfg.data, cfg.train.batch_size
    if d.source == "sparse-logreg":
        k, features = d.nnz, F64 * d.n_features
        chunk = max(CHUNK_ENTRIES, k) * SAMPLER  # the floor's samples, a chunk at a time
        # the step's batch (ids, values, labels) stays alive while evaluation draws one
        batches = b * (k * (I64 + 4 + SAMPLER) + 4 * F64)
        return Source(0, 6 * features + chunk, 4 * features, batches)
    factors = F64 * (d.n_users + d.n_items) * d.rank
    # ids, ratings, the noise and the means, the factor rows of each; the previous batch
    batches = b * (6 * I64 + 4 * F64 + 2 * F64 * d.rank)
    return Source(0, factors, factors, batches)
