"""What each of ``python -m scratchpar.batch``'s commands measures, in full and ``--quick``:
the models' flags, the layouts, the batches, the rates and the timing's repeats."""

from __future__ import annotations

MODELS = {  # the training command's models at their defaults, as a user would start
    "gpt": ["--model", "gpt"],
    "lstm": ["--model", "lstm"],
    "mlp": ["--model", "mlp", "--source", "classification"],
}
QUICK_MODELS = {
    "gpt": ["--model", "gpt", "--d-model", "16", "--n-layers", "1", "--n-heads", "2",
            "--seq-len", "16"],
    "lstm": ["--model", "lstm", "--d-model", "16", "--d-hidden", "16", "--seq-len", "16"],
    "mlp": ["--model", "mlp", "--source", "classification", "--n-features", "16",
            "--hidden-sizes", "32"],
}
TIMING = {"repeats": 5, "warmup": 2, "rounds": 3}
QUICK_TIMING = {"repeats": 2, "warmup": 1, "rounds": 1}

FIT_LAYOUTS = [  # (name, flags beyond the model's, ranks)
    ("one device", ["--strategy", "single"], 1),
    ("dp", ["--strategy", "dp"], 2),
    ("zero-1", ["--strategy", "zero", "--zero-stage", "1"], 2),
    ("zero-3", ["--strategy", "zero", "--zero-stage", "3"], 2),
    ("zero-2, offload", ["--strategy", "zero", "--zero-stage", "2", "--offload", "cpu"], 2),
    ("1F1B, pp 2, m 4", ["--strategy", "pipeline", "--pp", "2", "--microbatches", "4"], 2),
    ("tp 2", ["--strategy", "hybrid", "--tp", "2"], 2),
]
FIT_MODELS = {  # a GPT's rows are long sequences; the default MLP's are single samples
    "gpt": ["--model", "gpt", "--d-model", "128", "--n-layers", "4", "--n-heads", "4",
            "--seq-len", "64", "--vocab-size", "512", "--order", "1"],
    "mlp": ["--model", "mlp", "--source", "classification"],
}
QUICK_FIT_MODELS = {"gpt": QUICK_MODELS["gpt"], "mlp": QUICK_MODELS["mlp"]}

RATES = [1e-3, 3e-3, 1e-2, 3e-2]  # AdamW's: a run at 3e-4 was never a batch's best here
STEP_STUDIES = {  # model flags, the gap above the floor, the batches and the rates tried
    "gpt": (["--model", "gpt", "--d-model", "32", "--n-layers", "1", "--n-heads", "2",
             "--seq-len", "32", "--vocab-size", "16", "--order", "2"], 0.5,
            [4, 8, 16, 32, 64, 128, 256], RATES),
    "mlp": (["--model", "mlp", "--source", "classification", "--n-features", "32",
             "--hidden-sizes", "64"], 1.0, [4, 8, 16, 32, 64, 128, 256], [*RATES, 1e-1]),
}
QUICK_STEP_STUDIES = {
    "gpt": (QUICK_MODELS["gpt"][:-2] + ["--seq-len", "16", "--vocab-size", "8", "--order", "1"],
            0.15, [4, 16, 64], [1e-3, 3e-3]),
    "mlp": (QUICK_MODELS["mlp"], 1.6, [4, 16, 64], [1e-3, 3e-3]),
}
READ_ROWS, SEEDS = 64, 3  # the training loss read over at least 64 rows; three seeds a batch

SCALING = (STEP_STUDIES["gpt"][0], [8, 16, 32, 64, 128, 256], 0.05, 16384)
QUICK_SCALING = (QUICK_STEP_STUDIES["gpt"][0], [4, 16, 64], 0.05, 512)
