# The two commands of a fresh machine: `make demo` and `make test`.
# Both create/refresh the local venv (.venv) from pyproject.toml's pinned `test` extra.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv demo test test-fast snapshots generated bench-cpu plots clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/python scripts/demo.py

# Every test, on every core (pytest-xdist). test-fast: the compiler, CLI, diagnostics and lowering
# tests only (the tiers are the markers of tests/conftest.py).
test: $(STAMP)
	TRITON_INTERPRET=1 $(BIN)/python -m pytest -n auto

test-fast: $(STAMP)
	TRITON_INTERPRET=1 $(BIN)/python -m pytest -n auto -m "not (sim or sm90 or subprocess or fuzz)"

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

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
