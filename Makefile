# Two entry points for a fresh clone: `make demo` and `make test` (see README.md).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
AZURITE := node_modules/.bin/azurite
SERVICE := local-azure-batch
# Tests find the venv's tools (airflow, the local Batch service) and Azurite on PATH.
TEST_PATH := PATH="$(CURDIR)/$(BIN):$(CURDIR)/node_modules/.bin:$$PATH"

.PHONY: demo test lint typecheck venv clean bench

# Both distributions of this repository, editable: the provider and the local Batch service.
$(STAMP): pyproject.toml $(SERVICE)/pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --upgrade "pip>=24"
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e './$(SERVICE)[test]' -e '.[test]'
	touch $(STAMP)

$(AZURITE): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $(AZURITE)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/python scripts/demo.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

test: $(STAMP) $(AZURITE) lint typecheck
	$(TEST_PATH) $(BIN)/pytest $(SERVICE)/tests
	$(TEST_PATH) $(BIN)/pytest

# The benchmark suite (bench/README.md): 10-20 minutes; BENCH_ARGS=--quick for a smoke run.
bench: $(STAMP)
	$(BIN)/python bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) node_modules .pytest_cache .ruff_cache .mypy_cache
