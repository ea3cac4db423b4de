"""Datasets whose batch ``step`` is a pure function of ``(seed, step)``: synthetic, text, sparse."""

from scratchpar.data.classification import SyntheticClassification
from scratchpar.data.errors import DataError
from scratchpar.data.ratings import LowRankRatings
from scratchpar.data.shard import shard
from scratchpar.data.sparse_logreg import SparseLogistic
from scratchpar.data.synthetic import SyntheticLanguage
from scratchpar.data.text import Characters, CharText

__all__ = ["Characters", "CharText", "DataError", "LowRankRatings", "SparseLogistic",
           "SyntheticClassification", "SyntheticLanguage", "shard"]
