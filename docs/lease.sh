#!/usr/bin/env bash
# The GPU runs still to do (docs/devices.md), as one prepared command for a lent GPU machine,
# whose device time is short: each run under its own limit, in order, while the budget lasts.
#
#   bash docs/lease.sh [BUDGET seconds, default 540] [FIRST run, default 1]
#
# Each run's command and output go to $OUT/lease.log, its JSON to $OUT/runs.tgz; a run that
# does not fit in what is left of the budget is skipped and says so, and FIRST resumes a lease
# there. Wheels in .wheels/ (mpi4py and the mpich wheel: docs/devices.md) are installed first.
# CHECK=1 runs every command on the device double for 20 s at most: a check on the CPU that
# each still parses and starts (exit 0, or 124 when cut short), before a lease is spent on it.
set -u
budget=${1:-540}
first=${2:-1}
out=${OUT:-/tmp/lease}
check=${CHECK:-0}
device=cuda
[ "$check" = 1 ] && device=double budget=100000
export device  # the runs below that are functions read it in a shell of their own
python=${PYTHON:-python3}
json=runs/lease
mkdir -p "$out" "$json"
log=$out/lease.log
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 PYTHONUNBUFFERED=1 python
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PATH=$(dirname "$(command -v $python)"):$PATH
if [ -d .wheels ]; then
    $python -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .wheels/*.whl
    export PYTHONPATH=/tmp/site:$PYTHONPATH PATH=/tmp/site/bin:$PATH
fi
started=$(date +%s)

run() {  # run N LIMIT COMMAND…: run N of the list, if FIRST allows it and LIMIT seconds fit
    local n=$1 limit=$2 left
    shift 2
    [ "$n" -lt "$first" ] && return
    [ "$check" = 1 ] && limit=20
    left=$((budget - $(date +%s) + started))
    if [ "$left" -lt "$limit" ]; then
        echo "== run $n skipped: it needs $limit s, $left s are left; resume with FIRST=$n" \
            | tee -a "$log"
        return
    fi
    echo "== run $n ($limit s at most): $*" | tee -a "$log"
    local begun=$(date +%s)
    timeout "$limit" bash -c '"$@"' run "$@" >> "$log" 2>&1  # a function, or a command
    echo "== run $n: exit $? after $(($(date +%s) - begun)) s" | tee -a "$log"
}

stop_mps() {  # the MPS daemon that ranks sharing the GPU start (scratchpar/mps.py), if up
    [ "$device" = cuda ] && echo quit | nvidia-cuda-mps-control >> "$log" 2>&1
}

lstm_scaling() {  # data parallelism's weak scaling on the LSTM LM, 32 sequences a rank, CPU
    for n in 1 2 4; do
        mpiexec -n $n $python -m scratchpar.train --model lstm --strategy dp --device cpu \
            --batch-size $((32 * n)) --steps 200 | tail -1
    done
}
export -f lstm_scaling

captured() {  # the captured step: float64 losses bit for bit against the plain step's,
    # without dropout, with it (its masks drawn from an origin in device memory) and under
    # data parallelism at 2 ranks, then the time it wins, with the fused kernels
    for run in "single 0" "single 0.1" "dp 0.1"; do
        set -- $run
        for graph in no-cuda-graph cuda-graph; do
            mpiexec -n $([ $1 = dp ] && echo 2 || echo 1) $python -m scratchpar.train \
                --strategy $1 --device "$device" --dtype float64 --steps 30 --log-every 1 \
                --dropout $2 --$graph --metrics "runs/lease/$graph-$1-$2.jsonl" | tail -1
        done
        $python -c "import json
runs = [[json.loads(line).get('loss') for line in open(f'runs/lease/{g}-$1-$2.jsonl')]
        for g in ('no-cuda-graph', 'cuda-graph')]
print('captured step, $1, dropout $2, float64 losses bit for bit:', runs[0] == runs[1],
      len(runs[0]))"
    done
    for graph in --no-cuda-graph --cuda-graph; do
        SCRATCHPAR_FUSED=gpu $python -m scratchpar.train --strategy single --device "$device" \
            --steps 300 $graph | tail -1
    done
}
export -f captured

{ echo "lease on $(hostname), $(date -u), budget $budget s, device $device"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1
  $python -c "import numpy, mpi4py; print('numpy', numpy.__version__, 'mpi4py',
mpi4py.__version__)"; } >> "$log" 2>&1

# 1. The classic "4 devices ≈ 3×": 1, 2 and 4 ranks, each on a core of its own
run 1 120 lstm_scaling
# 2. The fused kernels (scratchpar/kernels): each against its plain ops, in every precision,
#    then the step against PyTorch's: the plain ops, the fused and the fused step captured
run 2 120 env SCRATCHPAR_FUSED=gpu $python -m pytest -q -p no:cacheprovider --device "$device" \
    tests/autograd/test_autograd_fused.py tests/optim/test_optim_fused.py
run 3 180 $python -m scratchpar.bench step --device "$device" --json $json/step_cuda.json
run 4 180 captured
# 3. Mixed precision on the device: the low-precision suites (fp16 only: CuPy has no
#    bfloat16), then 300 steps in fp32 beside fp16 (docs/precision.md has the CPU's)
run 5 150 $python -m pytest -q -p no:cacheprovider --device "$device" \
    tests/autograd/test_autograd_low_precision.py tests/nn/test_nn_low_precision.py tests/optim
run 6 60 $python -m scratchpar.train --strategy single --device "$device" --steps 300 \
    --precision fp32
run 7 60 $python -m scratchpar.train --strategy single --device "$device" --steps 300 \
    --precision fp16
# 4. Recomputation's cost where the T × T products are cheap
run 8 150 $python -m scratchpar.bench memory --device "$device" --ranks 1,2,4 \
    --json $json/memory_cuda.json
# 5. The all-reduce staged once, without MPS, then with it (the ranks start it themselves;
#    the second run checks that they do)
stop_mps
run 9 120 env SCRATCHPAR_MPS=off $python -m scratchpar.bench collectives --device "$device" \
    --ranks 2,4 --sizes 4K,64K,1M --json $json/collectives_cuda.json
run 10 120 $python -m scratchpar.bench collectives --device "$device" --ranks 2,4 \
    --sizes 4K,64K,1M --json $json/collectives_cuda_mps.json
# 6. The planner's validation under MPS, at 4 ranks
run 11 240 $python -m scratchpar.bench plan --device "$device" --ranks 4 --rounds 1 \
    --json $json/plan_cuda_mps.json
stop_mps
# 7. The CPU rows two cores cannot settle, on the machine's 16 cores
run 12 180 $python -m scratchpar.bench pipeline --device cpu --json $json/pipeline_16.json
run 13 90 $python -m scratchpar.bench collectives --device cpu --ranks 2,4,8 \
    --sizes 4K,1M,4M --json $json/collectives_16.json

echo "lease done after $(($(date +%s) - started)) s" | tee -a "$log"
tar -czf "$out/runs.tgz" -C runs lease
