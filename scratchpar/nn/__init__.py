"""Modules, layers, losses and models on the autograd."""

from .attention import Block, CausalSelfAttention
from .factorization import MatrixFactorization
from .gpt import GPT
from .layers import GELU, Dropout, Embedding, LayerNorm, Linear, ReLU, Tanh, set_dropout_generator
from .logistic import SparseLogisticRegression
from .loss import count_targets, half_squared_error, lm_loss, lm_output_loss, shift
from .mlp import MLP
from .module import Module, ModuleList, Parameter, Sequential
from .moe import Experts, MixtureOfExperts
from .rnn import LSTMLanguageModel, RNNLanguageModel
from .towers import Towers
from .unfilled import deferred

__all__ = ["GELU", "GPT", "MLP", "Block", "CausalSelfAttention", "Dropout", "Embedding",
           "Experts", "LSTMLanguageModel", "LayerNorm", "Linear", "MatrixFactorization",
           "MixtureOfExperts", "Module",
           "ModuleList", "Parameter", "ReLU", "RNNLanguageModel", "Sequential",
           "SparseLogisticRegression", "Tanh", "Towers", "count_targets", "deferred",
           "half_squared_error",
           "lm_loss", "lm_output_loss", "set_dropout_generator", "shift"]
