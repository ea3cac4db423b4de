"""Training: configuration, the strategy-agnostic loop, checkpoints and the command line."""

from .build import build_trainer
from .checkpoint import CheckpointError, save_checkpoint
from .cli import load_config, make_config
from .config import Config, ConfigError
from .loop import Trainer, format_summary
from .stored import Stored, load_checkpoint, open_checkpoint

__all__ = ["CheckpointError", "Config", "ConfigError", "Trainer", "build_trainer",
           "Stored", "format_summary", "load_checkpoint", "make_config", "load_config",
           "open_checkpoint", "save_checkpoint"]
