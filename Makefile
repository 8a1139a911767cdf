# Two entry points for a fresh clone: `make demo` and `make test` (see README.md).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
AZURITE := node_modules/.bin/azurite

.PHONY: demo test lint venv clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --upgrade "pip>=24"
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[test]'
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

test: $(STAMP) $(AZURITE) lint
	PATH="$(CURDIR)/$(BIN):$(CURDIR)/node_modules/.bin:$$PATH" $(BIN)/pytest

clean:
	rm -rf $(VENV) node_modules .pytest_cache .ruff_cache
