"""``python -m scratchpar.train``: parse the config, build the task and strategy, train, report."""

from __future__ import annotations

import sys

from ..backend import BackendError
from ..data import DataError
from .build import build_trainer
from .checkpoint import CheckpointError
from .config import ConfigError, load_config
from .loop import format_summary


def main(argv: list[str] | None = None) -> int:
    try:
        cfg = load_config(argv)
        trainer = build_trainer(cfg)
        summary = trainer.run()
    except (ConfigError, CheckpointError, BackendError, DataError) as e:
        print(f"scratchpar.train: {e}", file=sys.stderr)
        return 2
    print(format_summary(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
