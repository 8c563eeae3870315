# One entry point per job. Each target creates the virtual environment it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

.PHONY: demo test check lint types bench datasets clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

$(VENV)/.installed-bench: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	touch $@

demo: $(STAMP)
	$(BIN)/plangate demo

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

types: $(STAMP)
	$(BIN)/mypy

check: lint types

test: check
	$(BIN)/python -m pytest -q

bench: $(VENV)/.installed-bench
	$(BIN)/python -m tests.bench

datasets: $(STAMP)
	$(BIN)/python -m ci._build_datasets

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
