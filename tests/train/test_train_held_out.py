"""A text's held-out loss is held out: the run never trains on the file's last part, scores only
it, and ``evaluate --data`` scores another text whole."""

import shutil

from scratchpar.train import build_trainer, load_config
from scratchpar.train.trained import load_trained

SEEN, UNSEEN = "ab" * 900, "cd" * 100  # the last tenth's characters are nowhere before it


def test_the_last_tenth_is_never_trained_on(tmp_path):
    text = tmp_path / "abcd.txt"
    text.write_text(SEEN + UNSEEN, encoding="utf-8")
    cfg = load_config(["--data", str(text), "--strategy", "single", "--d-model", "16",
                       "--n-heads", "2", "--n-layers", "1", "--seq-len", "16", "--lr", "1e-2",
                       "--steps", "100", "--batch-size", "8", "--eval-batches", "4",
                       "--no-progress", "--metrics", str(tmp_path / "m.jsonl"),
                       "--save", str(tmp_path / "ck")])
    trainer = build_trainer(cfg)
    seen = trainer.task.dataset.data[:len(SEEN)]
    summary = trainer.run()
    # Trained on the last tenth too, the run would predict "cdcd…" as well as "abab…" (a loss
    # near 0); never having seen c or d, it is sure they do not come: ln 5 is a uniform guess.
    assert summary["eval_loss"] > 5
    after = trainer.task.loss(trainer.task.model, seen[None, :17].copy()).item()
    assert after < 0.1  # what it trained on, it learned

    same = load_trained(str(tmp_path / "ck"), data=str(text))  # the run's own held-out part
    assert same.task.evaluate(4, 8) == summary["eval_loss"]
    copy = tmp_path / "copy.txt"
    shutil.copy(text, copy)
    other = load_trained(str(tmp_path / "ck"), data=str(copy))  # another text: scored whole
    assert other.cfg.data.eval_fraction == 1
    assert other.task.evaluate(4, 8) < summary["eval_loss"] / 2  # mostly "abab…", which it knows
