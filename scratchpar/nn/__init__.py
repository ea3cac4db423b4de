"""Modules, layers, losses and models on the autograd."""

from .attention import Block, CausalSelfAttention
from .gpt import GPT
from .layers import GELU, Dropout, Embedding, LayerNorm, Linear, ReLU, Tanh, set_dropout_generator
from .loss import count_targets, lm_loss, lm_output_loss, shift
from .mlp import MLP
from .module import Module, ModuleList, Parameter, Sequential
from .rnn import LSTMLanguageModel, RNNLanguageModel
from .towers import Towers

__all__ = ["GELU", "GPT", "MLP", "Block", "CausalSelfAttention", "Dropout", "Embedding",
           "LSTMLanguageModel", "LayerNorm", "Linear", "Module", "ModuleList", "Parameter", "ReLU",
           "RNNLanguageModel", "Sequential", "Tanh", "Towers", "count_targets", "lm_loss",
           "lm_output_loss", "set_dropout_generator", "shift"]
