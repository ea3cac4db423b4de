"""Datasets whose batch ``step`` is a pure function of ``(seed, step)``: synthetic and text."""

from scratchpar.data.classification import SyntheticClassification
from scratchpar.data.errors import DataError
from scratchpar.data.shard import shard
from scratchpar.data.synthetic import SyntheticLanguage
from scratchpar.data.text import CharText

__all__ = ["CharText", "DataError", "SyntheticClassification", "SyntheticLanguage", "shard"]
