"""A few hundred steps on one device, with the optimizer and rate a sparse source brings (plain
SGD, as Hogwild steps), take each sparse problem to within a stated margin of its floor: sparse
logistic regression to its estimated Bayes risk, matrix factorization to noise²/2."""

import pytest

from scratchpar.train import build_trainer, make_config

# (data, margin above the floor): logistic regression starts ~0.4 nats above its floor, and 64
# held-out batches of 64 samples measure its loss to ~0.01 nats; the ratings start ~0.4 above
# theirs (0.005)
CASES = {
    "sparse-logreg": ({"n_features": 32, "nnz": 4}, 0.03),
    "matrix-factorization": ({"n_users": 40, "n_items": 30, "rank": 3, "noise": 0.1}, 0.003),
}


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("source", sorted(CASES))
def test_three_hundred_steps_reach_the_floor(tmp_path, source, seed):
    data, margin = CASES[source]
    trainer = build_trainer(make_config({
        "data": {"source": source, **data},
        "train": {"strategy": "single", "steps": 300, "batch_size": 64, "eval_batches": 64,
                  "seed": seed, "progress": False, "metrics": str(tmp_path / "m.jsonl")},
    }))
    before = trainer.task.evaluate(64, 64)
    summary = trainer.run()
    floor = summary["floor"]
    assert before > floor + 0.2
    assert summary["eval_loss"] > floor - margin  # no model beats the truth (up to noise)
    assert summary["gap"] < margin, summary
