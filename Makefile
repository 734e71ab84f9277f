# The two commands of a fresh machine: `make demo` and `make test`.
# Both create/refresh the local venv (.venv) from pyproject.toml's pinned `test` extra.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv demo lint test test-fast test-oldest test-newest snapshots generated bench-cpu plots clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

# The oldest versions pyproject.toml's ranges admit, in a second venv (.venv-oldest): the lower bounds
# of its dependencies and of the gpu extra (torch 2.9.0 is a CUDA build of about 4 GB with its nvidia
# wheels: PyPI has no CPU-only torch for Linux x86_64; it runs on the CPU all the same).  The test
# tools come from the test extra, pinned as there.
OLDEST := triton==3.5.0 torch==2.9.0 libcst==1.1.0 sympy==1.13.3 platformdirs==3.0.0
OLDEST_VENV := .venv-oldest
OLDEST_STAMP := $(OLDEST_VENV)/.installed
# The test extra's pins of all but the packages that the pins given ($(1)) name.
test_tools = $(shell $(PYTHON) -c 'import sys, tomllib; own = {p.split("==")[0] for p in sys.argv[1:]}; print(*(r for r in tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["test"] if r.split("==")[0] not in own))' $(1))

$(OLDEST_STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(OLDEST_VENV)
	$(OLDEST_VENV)/bin/python -m pip install -q --upgrade pip
	$(OLDEST_VENV)/bin/python -m pip install -q -e . $(OLDEST) $(call test_tools,$(OLDEST))
	touch $(OLDEST_STAMP)

# The newest releases PyPI serves of the same packages, in a third venv (.venv-newest).  torch 2.15.0
# depends on triton 3.9.0, and PyPI serves it as a CUDA 13 build.  PIP_CONFIG_FILE=/dev/null: pip reads
# no configuration file, so that a machine's pip.conf (a constraint file capping torch, say) cannot hold
# these pins back.
NEWEST := triton==3.9.0 torch==2.15.0 libcst==1.9.0 sympy==1.14.0 platformdirs==4.14.9
NEWEST_VENV := .venv-newest
NEWEST_STAMP := $(NEWEST_VENV)/.installed

$(NEWEST_STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(NEWEST_VENV)
	PIP_CONFIG_FILE=/dev/null $(NEWEST_VENV)/bin/python -m pip install -q --upgrade pip
	PIP_CONFIG_FILE=/dev/null $(NEWEST_VENV)/bin/python -m pip install -q -e . $(NEWEST) $(call test_tools,$(NEWEST))
	touch $(NEWEST_STAMP)

demo: $(STAMP)
	$(BIN)/python scripts/demo.py

# ruff's lint and format check over the tree, mypy over castpile/ (configured in pyproject.toml).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Every test, on every core (pytest-xdist), after lint. test-fast: the compiler, CLI, diagnostics and
# lowering tests only (the tiers are the markers of tests/conftest.py).  SIM_TESTS: the simulator's own
# tests and the samples on simulated ranks.
FAST_TIER := -m "not (sim or sm90 or subprocess or fuzz)"
SIM_TESTS := tests/test_sim.py tests/test_samples_run.py

test: lint
	TRITON_INTERPRET=1 $(BIN)/python -m pytest -n auto

test-fast: $(STAMP)
	TRITON_INTERPRET=1 $(BIN)/python -m pytest -n auto $(FAST_TIER)

# Under the oldest pins: the fast tier, then the simulator's own tests and the samples on simulated
# ranks.  Left out: castpile's remote (NVSHMEM) helpers with scalar masks, which triton 3.5's
# interpreter cannot run (tl.sort of a one-element block).
test-oldest: $(OLDEST_STAMP)
	TRITON_INTERPRET=1 $(OLDEST_VENV)/bin/python -m pytest -n auto $(FAST_TIER) \
		--deselect tests/test_scalar_forms.py::test_remote_signal_and_wait_with_scalar_masks
	TRITON_INTERPRET=1 $(OLDEST_VENV)/bin/python -m pytest -n auto $(SIM_TESTS)

# Under the newest pins: what test-oldest runs, then the sm_90 compile tier (every kernel compiled for Hopper on
# the CPU), since a new triton changes its compiler as much as its interpreter.
test-newest: $(NEWEST_STAMP)
	TRITON_INTERPRET=1 $(NEWEST_VENV)/bin/python -m pytest -n auto $(FAST_TIER)
	TRITON_INTERPRET=1 $(NEWEST_VENV)/bin/python -m pytest -n auto $(SIM_TESTS)
	TRITON_INTERPRET=1 $(NEWEST_VENV)/bin/python -m pytest -n auto -m sm90

bench-cpu: $(STAMP)
	$(BIN)/python benchmarks/bench_cpu.py --out docs/data/bench-cpu.json

snapshots: $(STAMP)
	CASTPILE_UPDATE_SNAPSHOTS=1 TRITON_INTERPRET=1 $(BIN)/python -m pytest tests/test_snapshots.py

generated: $(STAMP)
	$(BIN)/python scripts/regenerate.py

plots: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[plot]'
	$(BIN)/python benchmarks/plot.py docs/data/bench-rmsnorm.json docs/data/bench-rmsnorm.png --title "all-reduce + residual + RMSNorm, 2 x H200, bf16"
	$(BIN)/python benchmarks/plot.py docs/data/bench-moe.json docs/data/bench-moe.png --x tokens --title "MoE dispatch / combine, H 7168, top-8 of 64, 2 x H200"
	$(BIN)/python benchmarks/plot.py docs/data/bench-tp-gemm.json docs/data/bench-tp-gemm-ag.png --x M --xlabel "M x K x N (M: all ranks' rows)" --select op=all_gather_matmul --title "all-gather + GEMM, 2 x H200, bf16"
	$(BIN)/python benchmarks/plot.py docs/data/bench-tp-gemm.json docs/data/bench-tp-gemm-rs.png --x M --xlabel "M x K x N (M: all ranks' rows)" --select op=matmul_reduce_scatter --title "GEMM + reduce-scatter, 2 x H200, bf16"
	$(BIN)/python benchmarks/plot.py docs/data/bench-sweep-row-bodies.json docs/data/bench-sweep-row-bodies.png --x W --xlabel "W (buffers on one H200)" --select body=res_weight_hoisted --select loop=for --select binding=2d --select cast=to --select dtype=bf16 --title "row loop: stack sum + residual + RMSNorm x weight, 4096 x 8192 bf16, one H200"
	$(BIN)/python benchmarks/plot.py docs/data/bench-sweep-row-bodies.json docs/data/bench-sweep-row-bodies-1d.png --x W --xlabel "W (buffers on one H200)" --select body=res_weight_hoisted --select loop=for --select binding=1d --select cast=to --select dtype=bf16 --title "1-D row loop: stack sum + residual + RMSNorm x weight, bf16"
	$(BIN)/python benchmarks/plot.py docs/data/bench-sweep-column-blocks.json docs/data/bench-sweep-column-blocks.png --x W --xlabel "W (buffers on one H200)" --select body=norm --select binding=1d --select BLOCK_D=1024 --title "1-D column blocks: two-pass norm, 4096 x 8192 bf16, BLOCK_D 1024"

clean:
	rm -rf $(VENV) $(OLDEST_VENV) $(NEWEST_VENV) .pytest_cache .hypothesis .mypy_cache .ruff_cache
