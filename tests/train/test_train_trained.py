"""A checkpoint's model comes back on one device with the figures its run ended on: the held-out
loss, a classifier's accuracy, and no bits per character where a token is not a character."""

import numpy as np
import pytest

from scratchpar.autograd import no_grad
from scratchpar.peak import peak_bytes
from scratchpar.train import build_trainer, load_config
from scratchpar.train.checkpoint import CheckpointError
from scratchpar.train.task import eval_rows
from scratchpar.train.trained import load_trained

RUNS = {"classification": ["--source", "classification", "--n-features", "12",
                           "--hidden-sizes", "16", "--n-classes", "5"],
        "sparse-logreg": ["--source", "sparse-logreg", "--n-features", "64", "--nnz", "4"],
        "matrix-factorization": ["--source", "matrix-factorization", "--n-users", "20",
                                 "--n-items", "20"],
        "synthetic": ["--d-model", "16", "--n-heads", "2", "--n-layers", "1", "--seq-len", "12",
                      "--vocab-size", "10", "--order", "1"]}


def trained_run(tmp_path, name):
    cfg = load_config([*RUNS[name], "--strategy", "single", "--steps", "12", "--batch-size", "16",
                       "--eval-batches", "3", "--no-progress", "--save", str(tmp_path / "ck"),
                       "--metrics", str(tmp_path / "m.jsonl")])
    trainer = build_trainer(cfg)
    return trainer, trainer.run()


def labels_right(task, batches, batch_size) -> float:
    """The share of held-out samples labelled right, counted here from the logits."""
    right = total = 0
    task.model.eval()
    for i in range(batches):
        (*inputs, y), n = task.held_out_batch(i, batch_size)
        with no_grad():
            out = task.model(*inputs).data
        said = (out > 0).astype(y.dtype) if out.ndim == 1 else out.argmax(-1)
        right += int((said == y).sum())
        total += n
    return right / total


@pytest.mark.parametrize("name", list(RUNS))
def test_the_checkpoint_scores_as_its_run_ended(tmp_path, name):
    trainer, summary = trained_run(tmp_path, name)
    back = load_trained(str(tmp_path / "ck"))
    assert back.step == 12 and back.cfg.model == trainer.cfg.model
    for p, q in zip(back.task.model.parameters(), trainer.task.model.parameters()):
        assert np.array_equal(p.data, q.data)
    assert back.task.evaluate(3, 16) == summary["eval_loss"]
    assert summary["bits_per_char"] is None  # no token here is a character
    accuracy = back.task.held_out(3, 16)[1]
    assert accuracy == summary["accuracy"]
    if name in ("classification", "sparse-logreg"):
        assert accuracy == labels_right(back.task, 3, 16) and 0 < accuracy < 1
    else:
        assert accuracy is None


def test_another_text_is_only_for_a_model_of_text(tmp_path):
    trained_run(tmp_path, "synthetic")
    with pytest.raises(CheckpointError, match="holds a model of the synthetic data"):
        load_trained(str(tmp_path / "ck"), data=str(tmp_path / "m.jsonl"))


@pytest.mark.parametrize("name", list(RUNS))
def test_a_rank_s_share_at_a_time_scores_as_the_whole_batch(tmp_path, name):
    """Rank 0 scores each held-out batch a rank's share of rows at a time (``eval_rows``):
    the same loss and accuracy as the whole batch at once, in less memory."""
    trainer, _ = trained_run(tmp_path, name)
    task = trainer.task
    with peak_bytes() as whole_peak:
        whole = task.held_out(3, 16)
    with peak_bytes() as share_peak:
        shared = task.held_out(3, 16, rows=eval_rows(trainer.cfg, 4))
    assert shared[0] == pytest.approx(whole[0], rel=1e-6) and shared[1] == whole[1]
    if name == "synthetic":  # the GPT's activations grow with the rows scored at once
        assert share_peak.bytes < whole_peak.bytes
