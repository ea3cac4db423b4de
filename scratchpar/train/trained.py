"""A trained model back from its checkpoint alone, on one device, for sampling and evaluation.

A checkpoint holds whole tensors under the single-device model's names, whatever strategy
and world size wrote it, and the config of its run: the model is rebuilt from that config and
its weights loaded, with no MPI. A text's vocabulary is in the checkpoint too, so the model
reads and writes characters without the file it learned from.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from ..backend import BackendError, set_device
from ..data import DataError
from ..device_rng import DeviceRandom
from .checkpoint import CheckpointError
from .cli import make_config
from .config import Config
from .option import ConfigError
from .precision import AtPrecision
from .resume import trained_with
from .stored import open_checkpoint
from .task import Task, build_task

# what a bad checkpoint, data file or device raises while loading: one line, exit status 2
LOAD_ERRORS = (CheckpointError, ConfigError, DataError, BackendError, OSError)


@dataclass
class Trained:
    """A checkpoint's model in its task, the run's config and the step it was saved at."""

    directory: str
    cfg: Config
    task: Task
    step: int


def load_trained(directory: str, device: str = "cpu", data: str | None = None,
                 text: bool = True) -> Trained:
    """The model saved in ``directory`` on ``device``, in the task of its own data, or of the
    text file ``data`` read with the model's vocabulary; without ``text``, a model of text
    comes with its vocabulary alone, its file unread (to write text, not to score it).
    Raises CheckpointError for a checkpoint that cannot be read or does not fit its own
    config, or whose text is not there; ConfigError for a config this version cannot build;
    DataError for the data."""
    with open_checkpoint(directory) as stored:
        meta = stored.meta
        trained, problems = trained_with(directory, meta=meta)
        if problems:
            raise CheckpointError(problems[0])
        if "model" not in stored.parts():
            raise CheckpointError(f"{directory} holds no model")
        vocabulary = meta.get("vocabulary")
        text = text or data is not None or vocabulary is None  # a text's file is read
        cfg = _config(directory, trained, device, data, text)
        set_device(cfg.train.device)
        task = build_task(cfg, DeviceRandom(cfg.train.seed, 1, 0), chars=vocabulary, text=text)
        names = [name for name, _ in task.model.named_parameters()]
        try:  # the weights at fp32: a 16-bit run's masters
            task.model.load_state_dict(AtPrecision(stored, names, sixteen=False).part("model"))
        except (KeyError, ValueError, TypeError) as e:
            raise CheckpointError(f"{directory}: its model does not fit its own config: {e}") \
                from e
    task.model.eval()
    return Trained(str(directory), cfg, task, meta.get("step", 0))


def _config(directory: str, trained: dict, device: str, data: str | None,
            text: bool) -> Config:
    """The run's config for one device: its model and data, the text ``data`` in place of
    its own where given (a text it never read is all held out); ``text``: its file is read."""
    t = trained["train"]
    values = {"model": trained["model"], "data": dict(trained["data"]),
              "train": {"strategy": "single", "device": device,
                        **{k: t[k] for k in ("seed", "dtype", "batch_size", "eval_batches")
                           if k in t}}}
    path = values["data"].get("path")  # the text it was trained on, if any
    if data is not None:
        source = values["data"].get("source", "synthetic")
        if source != "text":
            raise CheckpointError(f"{directory} holds a model of the {source} data: --data "
                                  "reads another text with a model trained on one")
        values["data"]["path"] = data
    if text and data is None and path is not None and not Path(path).is_file():
        raise CheckpointError(f"{directory} was trained on {path}, which is not there from "
                              "this folder: give the text with --data PATH")
    cfg = make_config(values, check=text)
    if data is not None and not _same_file(data, path):
        cfg = replace(cfg, data=replace(cfg.data, eval_fraction=1.0))
    return cfg


def _same_file(path: str, trained_on: str | None) -> bool:
    """Whether ``path`` is the file the model was trained on (its held-out part is then the
    run's); a file that cannot be compared is another."""
    try:
        return trained_on is not None and Path(path).samefile(trained_on)
    except OSError:
        return False
