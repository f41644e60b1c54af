# Two entry points: `make run` (nightly flow on the shipped examples, embedded defaults)
# and `make test` (lint, types, the whole suite on SQLite and PostgreSQL).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt
export HINDSIGHT_DATA_DIR ?= .hindsight

.PHONY: run test lint typecheck bench install install-dev clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) -e ".[embeddings]"
	touch $@

# llama-cpp-python (the local test model's server) compiles once and pip caches the wheel; it is
# built portable (no -march=native): a cached native build crashed (SIGSEGV) on another CPU
$(VENV)/.installed-dev: pyproject.toml constraints.txt $(VENV)/.installed
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(PIP) -e ".[dev,embeddings]"
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

run: $(VENV)/.installed
	$(BIN)/hindsight nightly --input examples

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check memory_core

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/pytest

bench: $(VENV)/.installed-dev
	$(BIN)/python bench/nightly.py

clean:
	rm -rf $(VENV) .hindsight .pytest_cache .mypy_cache .ruff_cache
