"""Every numbered example in mpi_examples/ runs with the command in its header and prints what it
teaches: one mpiexec job per example, under a hard timeout."""

import re

import pytest
from launch_helpers import ROOT, run_mpi

EXAMPLES = sorted((ROOT / "mpi_examples").glob("[0-9][0-9]_*.py"))
HEADER = re.compile(r"# mpiexec -n (\d+) python (mpi_examples/\S+\.py)")
EXPECTED = {  # lines (or parts of lines) each example must print
    "01_point_to_point.py": [
        "rank 1 received [0. 1. 2. 3. 4.]",
        "rank 0 got 3 from rank 3",  # isend/irecv ring shift
        "rank 0 got 30 from rank 3",  # sendrecv ring shift
        "rank 1, 0.5 s before any receive:",
        "after the receives: all done",
    ],
    "02_ring_all_reduce.py": [
        "reduce-scatter, step 1 of 3",
        "rank 0: sends chunk 3 (0004) to rank 1, adds chunk 2 from rank 3: 0003 + 3000 = 3003",
        "rank 3: sends chunk 0 (1110) to rank 0, adds chunk 3 from rank 2: 4000 + 0444 = 4444",
        "rank 2:  0110    0200   [3333]   0444",
        "rank 1: sends chunk 1 (2222) to rank 2, receives chunk 0 (1111) from rank 0",
        "rank 3:  1111    2222    3333    4444",
        "reference.all_reduce: yes, on every rank",
    ],
    "03_collectives_tour.py": [
        "rank 0:    [0, 1, 2, 3, 4]  →  [6, 10, 14, 18, 22]",  # reduce to the root
        "rank 1:    [1, 2, 3, 4, 5]  →  None",
        "rank 0:    [0, 1, 2, 3, 4]  →  [6, 10]",  # reduce-scatter: 5 rows as 2, 1, 1, 1
        "rank 2:       [20, 21, 22]  →  [0, 10, 11, 20, 21, 22, 30, 31, 32, 33]",
        "rank 3:               None  →  [8, 9]",  # scatter
    ],
    "04_mesh.py": [
        "Mesh dp=2 × pp=2 × tp=2 over 8 ranks",
        "rank 5 at (dp=0, pp=1, tp=1)   dp [5, 7] → 12   pp [1, 5] → 6    tp [4, 5] → 9 ",
        "tp, cp, dp, pp in turn → 28",
        "checked: right on every rank",
    ],
    "05_data_parallel.py": [
        "4 parameter arrays in 3 buckets of at most 256 bytes; a global batch of 10 samples over 4",
        "rank 2: rows 6..7 (2 samples)",  # 10 rows over 4 ranks: 3, 3, 2, 2
        "Σ Lᵣ / N = 17.384533 / 10 = 1.738453   one device: 1.738453",
        "mean of the per-rank means would be 1.799617: wrong, shards differ",
        "every rank's gradient equals the one-device gradient (rtol 1e-10): yes",
        "step 4: loss 0.786544 (one device 0.786544)",
        "all replicas bitwise identical: yes",
    ],
    "06_buckets_and_overlap.py": [  # the plan is fixed; the traced times vary from run to run
        "17 parameter arrays in 7 buckets of at most 8192 bytes",
        "bucket 0 ( 1792 bytes): head.weight, ln_f.bias, ln_f.weight, blocks.0.mlp.2.bias",
        "bucket 6 ( 1408 bytes): tok.weight",  # the embeddings: last ready, last started
        "communication left after backward (exposed, added to the step):",
        "bucket all-reduces started in plan order on every rank: yes",
        "(below 1e-12: yes)",  # bucketed gradients equal DataParallelNaive's
    ],
    "07_local_sgd.py": [
        "local SGD on 4 ranks: 8 rows each, replicas averaged every 3 steps",
        "step 2  loss 0.746168  spread 0.799825",  # the replicas drift apart
        "step 3  loss 0.683965  spread 0.000000  ← averaged: replicas identical",
        "step 4  loss 1.168765  spread 0.530289",  # the average fits each shard less well
        "step 9  loss 0.577794  spread 0.000000  ← averaged: replicas identical",
        "local SGD     3 parameter/gradient all-reduces,   3528 bytes; 9 of 24 bytes for the loss",
        "DataParallel  9 parameter/gradient all-reduces,  10584 bytes; 9 of 16 bytes for the loss",
    ],
    "08_pipeline_schedules.py": [  # a pure simulation: every line is fixed
        "F0  F1  F2  B0  F3  B1  F4  B2  F5  B3  F6  B4  F7  B5  B6  B7  STEP",  # 1F1B, rank 1
        "rank 3 │ ·  ·  ·  F0 F1 F2 F3 F4 F5 F6 F7 B7 B7 B6 B6",  # GPipe: all F, then all B
        "rank 0 │ F0 F1 F2 F3 ·  ·  ·  ·  ·  ·  B0 B0 F4 B1 B1 F5",  # 1F1B
        "GPipe            27.3%            27.3%        48   8  8  8  8",
        "1F1B             27.3%            27.3%        48   4  3  2  1",
        "interleaved      15.8%            15.8%       112  11  9  7  5",
        "deadlock with rendezvous sends: rank 0 blocks at SEND_ACT 1→1 (action 3), "
        "rank 1 blocks at SEND_GRAD 0→0 (action 3)",
        "check() passes; simulated bubble 33.3%",
    ],
    "09_pipeline_parallel.py": [  # times vary; the order of events and the numbers do not
        "rank 2 holds layer 2 (Linear 16→16 + ReLU): max |∂L/∂θ − one device's| 0.0e+00",
        "loss 1.495635, one device 1.495635",
        "forward    ·          ·          ·",  # while one rank works, three wait
        "·          ·          ·          backward",
        "rank 0: layer 0 (0.weight, 0.bias)  runtime.peak 8 (m = 8)",  # GPipe
        "rank 1: layer 1 (2.weight, 2.bias)  runtime.peak 3 (p − s = 3)",  # 1F1B
        "rank 3: layer 3 (6.weight, 6.bias)  runtime.peak 1 (p − s = 1)",
        "loss 1.495635 (one device 1.495635); every rank's gradient equals one device's to "
        "1e-12: yes",
    ],
    "10_parallel_branches.py": [  # 4 towers over 3 ranks: 2, 1, 1
        "rank 0 holds towers 0, 1 and the head: 265 of 467 parameters",
        "rank 2 holds towers 3 and the head: 164 of 467 parameters, named as one device names "
        "them (towers.3.0.weight, …)",
        "rank 1: loss 1.549281 (one device 1.549281)",
        "step 5: loss 0.865044 (one device 0.865044)",
        "gathered back on rank 0: 18 arrays under the one-device names, equal to one device's "
        "after 5 steps (to 1e-12): yes",
    ],
    "11_tensor_parallel.py": [  # a GPT over tp = 2
        "rank 0 holds heads 0–1 of 4, hidden units 0–15 of 32, vocabulary rows 0–6 of 13: "
        "1096 of 2016 parameters",
        "rank 1: logits (3, 6, 6), loss 2.8648865814",  # its 6 of 13 logit columns
        "one device's nn.lm_loss 2.8648865814",
        "loss equals one device's on every rank (to 1e-12): yes",
        "every gradient equals one device's (to 1e-12): yes",
    ],
    "12_hybrid_mesh.py": [  # dp=1 × pp=2 × tp=2
        "Mesh dp=1 × pp=2 × tp=2 over 4 ranks",
        "rank 2 at (dp=0, pp=1, tp=0): stage 1 = block 1, norm and head, tp shard 0 of it: "
        "532 of 2016 parameters; talks to tp [2, 3], pp [0, 2]",
        "step 2: loss 2.6183858505",
        "one device 2.6183858505",
        "one device's model (to 1e-12): yes",
        "So keep tp inside a node",
    ],
    "13_parameter_server.py": [  # 2 servers and 2 workers, then 1 server and 3 workers
        "server 0 (rank 0) owns keys 0–36 of 74: 0.weight, 0.bias[0:2]",
        "server 1 (rank 1) owns keys 37–73 of 74: 0.bias[2:7], 2.weight, 2.bias",
        "step 2: loss 1.148910733316   one device 1.148910733316",
        "every parameter equals one device's (to 1e-12): yes",
        "parameter servers: 12 pushes applied, as many as the workers sent, in 12 updates · "
        "staleness mean 0.00, max 0",
        "in that order, equals the server's parameters bitwise: yes",
    ],
    "14_async_parameter_servers.py": [  # the counts are fixed; staleness and waits vary
        "parameter servers: 90 pushes applied, as many as the workers sent, in 90 updates",
        "parameter servers: 24 pushes applied, as many as the workers sent, in 24 updates",
        "parameter servers: 90 pushes applied, as many as the workers sent, in 30 updates",
        "parameter servers: 90 pushes applied, as many as the workers sent, in 70 updates",
        "SSP: staleness ≤ τ = 1: yes",
    ],
    "15_elastic_averaging.py": [  # synchronous and round-robin are deterministic
        "ρ = 0.0: the farthest copy from x̃ after steps 10, 20, 30: 3.101, 3.802, 4.384; "
        "centre's held-out loss 2.0058",
        "ρ = 0.25: the farthest copy from x̃ after steps 10, 20, 30: 1.125, 0.651, 0.557; "
        "centre's held-out loss 0.3682",
        "the master answered 45 exchanges, the workers made 15+15+15",
        "step 0 (worker 0): loss 2.1438; step 29 (worker 2): loss 0.6681; centre's held-out "
        "loss 0.6225",
    ],
    "16_hogwild.py": [  # the lock's count, the measures and one device are fixed; Hogwild's not
        "under the window's exclusive lock: 1200 of 1200 increments landed, 0 lost (0%)",
        "logistic regression, with the bias   Ω =  9   Δ = 1.000   ρ = 1.000",
        "matrix factorization, 200 × 200, r 4 Ω =  8   Δ = 0.010   ρ = 0.018",
        "one device on the same batches       held-out loss 0.4493",
        "the floor (the Bayes risk)           0.3562 ± 0.0009",
    ],
    "17_zero.py": [
        "a GPT of Ψ = 105,216 float32 parameters, AdamW, 4 ranks; KiB per rank measured (formula)",
        "  ZeRO-3                102.8 ( 102.8)      102.8 ( 102.8)      205.5 ( 205.5)",
        "  ZeRO-3 + offload      102.8 ( 102.8)        0.0 (   0.0)        0.0 (   0.0)      "
        "411.0 ( 411.0)",
        "4.158169 (one device 4.158169)",
        "(the largest: 64.0 KiB)",
    ],
    "18_zero3_gather_free.py": [  # the order and sizes are fixed; the times vary
        "layers: layer 4, layer 3, layer 2, layer 1, layer 0, root; 4 ranks; rank 0 holds "
        "9,928 of 39,712 parameters",
        "all_gather/ring       50,816 bytes",
        "reduce_scatter/ring   50,816 bytes",
        "gathers 22, frees 22 over two steps; gathered buffers still alive after the step: 0",
        "the graph after forward held 286,052 bytes, none of them parameters",
    ],
    "19_ring_attention.py": [  # a fixed sequence: every count and verdict is fixed
        "rank 0 holds positions [0, 1, 2, 21, 22, 23]",
        "  step 1: block of rank 3, 18 query-key pairs",
        "  work: 75 pairs zig-zag, 129 contiguous",
        "busiest rank ÷ mean work: zig-zag 1.00, contiguous 1.72",
        "equals one device's attention on every rank: max |error|",
        "equals scratchpar's RingAttention: yes",
    ],
    "20_expert_parallel.py": [  # fixed routes and counts; the |Δ| printed beside them may vary
        "8 experts over 4 ranks (2 each), top 2; 2 rows of 3 tokens a rank, width 4",
        "→ experts [5, 7], gates [0.61 0.39]",  # rank 0's token 0
        "capacity ⌈k·N·c/E⌉ = ⌈2·24·1.0/8⌉ = 6 assignments an expert; one device drops 7",
        "  rank 2       2                   0   1   5   4    11 rows for experts 4–5",
        "every rank's combined rows equal one device's layer: max |error|",
        "dropped 0 (one device 0): matches one device",  # dropless
        "dropped 7 (one device 7): matches one device",  # c = 1.0, global capacity
    ],
}


def header(path):
    """The world size in the example's first line, which must be the command that runs it."""
    first = path.read_text().splitlines()[0]
    match = HEADER.fullmatch(first)
    assert match, f"{path.name}: first line must be '# mpiexec -n N python mpi_examples/…'"
    assert match[2] == f"mpi_examples/{path.name}", f"{path.name}: header runs {match[2]}"
    return int(match[1])


def test_every_example_has_expected_lines():
    assert [p.name for p in EXAMPLES] == sorted(EXPECTED)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs_as_its_header_says(path):
    result = run_mpi(header(path), [str(path.relative_to(ROOT))], timeout=240)
    out = result.stdout
    assert result.returncode == 0, f"{path.name} exited {result.returncode}:\n{out[-4000:]}\n" \
                                   f"{result.stderr[-3000:]}"
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    for line in EXPECTED[path.name]:
        assert line in out, f"{path.name} did not print {line!r}:\n{out[-4000:]}"


def test_wrong_world_size_is_a_message_not_a_traceback():
    result = run_mpi(2, ["mpi_examples/04_mesh.py"], timeout=120)
    assert result.returncode == 2
    assert "cannot be laid out on a world of 2 ranks" in result.stdout
    assert "run it as: mpiexec -n 8 python mpi_examples/04_mesh.py" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
