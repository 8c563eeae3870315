# One entry point per job. Each target creates the virtual environment it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

.PHONY: demo test check lint types bench datasets clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,examples,mcp,atif,ray,delta]'
	touch $@

$(VENV)/.installed-bench: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	touch $@

demo: $(STAMP)
	$(BIN)/plangate demo

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

# mypy cannot follow the editable install's import hook: it checks a tree of links that mirrors
# the installed layout, plangate.X -> X/ (see [tool.setuptools] package-dir in pyproject.toml).
TYPECHECK := $(VENV)/typecheck/plangate
types: $(STAMP)
	rm -rf $(TYPECHECK) && mkdir -p $(TYPECHECK)
	for f in plangate/*; do ln -s ../../../$$f $(TYPECHECK)/; done
	for p in harness replay evaluators ci; do ln -s ../../../$$p $(TYPECHECK)/$$p; done
	$(BIN)/mypy

check: lint types

# Each test file runs on one worker (`loadfile`): its module fixtures, such as the Node.js
# example's `npm ci`, are built once. (pytest-xdist's `loadgroup` marks are lost under pytest 9,
# which names items from `_id`: two workers then ran the same file's `npm ci` at once.)
test: check
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

bench: $(VENV)/.installed-bench
	$(BIN)/python -m tests.bench

datasets: $(STAMP)
	$(BIN)/plangate dataset build

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
