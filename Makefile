# Two entry points for a fresh clone: `make demo` and `make test` (see README.md).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
AZURITE := node_modules/.bin/azurite
SERVICE := local-azure-batch
# Tests find the venv's tools (airflow, the local Batch service) and Azurite on PATH.
TEST_PATH := PATH="$(CURDIR)/$(BIN):$(CURDIR)/node_modules/.bin:$$PATH"

.PHONY: demo test lint typecheck venv clean bench compat compat-venv compat-unit compat-examples compat-deployment

# Both distributions of this repository, editable: the provider and the local Batch service.
$(STAMP): pyproject.toml $(SERVICE)/pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --upgrade "pip>=24"
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e './$(SERVICE)[test]' -e '.[test,dev]'
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

# The benchmark suite (bench/README.md): 30-40 minutes; BENCH_ARGS=--quick for a smoke run.
bench: $(STAMP)
	$(BIN)/python bench/run.py $(BENCH_ARGS)
	$(BIN)/python bench/view.py $(BENCH_ARGS)

# Older Airflow lines and the dependency floors (README "Airflow lines"): `make compat LINE=3.0`.
# LINE is 3.0, 3.1, 3.2, 3.3 (constraints/airflow-LINE.txt) or lowest-direct; each gets its own venv,
# with pip's cache shared by all of them. The provider's whole suite runs in `make test` only.
LINE ?= 3.2
COMPAT_CONSTRAINTS := constraints/$(if $(filter lowest-direct,$(LINE)),lowest-direct,airflow-$(LINE)).txt
COMPAT_VENV := .venv-$(LINE)
COMPAT_BIN := $(COMPAT_VENV)/bin
COMPAT_STAMP := $(COMPAT_VENV)/.installed
COMPAT_TEST_PATH := PATH="$(CURDIR)/$(COMPAT_BIN):$(CURDIR)/node_modules/.bin:$$PATH"
# Pure logic, what differs between lines (one process each), a retry reattaching without 3.3's task state
# store, and what ends a wait when tasks fail (a skipped task, blocked dependents) with each line's exceptions.
WHEN_TASKS_FAIL := tests/provider/test_when_tasks_fail.py
COMPAT_UNIT_TESTS ?= tests/unit tests/compute tests/lines \
	tests/provider/test_reattach_and_sensor.py::test_a_later_try_reattaches_to_the_running_job \
	"$(WHEN_TASKS_FAIL)::test_a_task_waiting_on_a_failed_task_ends_the_wait_naming_both[sync]" \
	"$(WHEN_TASKS_FAIL)::test_skip_on_exit_code_skips_the_airflow_task_and_a_mixed_failure_still_fails[sync]"
EXAMPLES ?= example_azbatch_hello example_azbatch_deferrable
# Scheduler + triggerer (and Azurite, the cluster's storage): the deferrable example's output in the task log
# (and its metric), a deferred @task.azure_batch function, and each feature that differs between lines: log
# sources, the deferred kill, checkpoints across a triggerer restart, the connection form.
REAL_AIRFLOW := tests/airflow_run/test_real_airflow.py
COMPAT_DEPLOYMENT_TESTS ?= $(REAL_AIRFLOW)::test_output_streams_while_deferred_and_appears_once \
	$(REAL_AIRFLOW)::test_first_output_appears_within_a_poll_of_the_trigger_start \
	$(REAL_AIRFLOW)::test_marking_a_deferred_task_failed_terminates_its_job \
	$(REAL_AIRFLOW)::test_a_triggerer_restart_loses_no_line \
	$(REAL_AIRFLOW)::test_the_connection_form_as_the_ui_receives_it_shows_no_null \
	$(REAL_AIRFLOW)::test_a_deferred_taskflow_function_returns_what_the_dag_branches_on
# Each line's pytest temporary files in the checkout: a shared /tmp/pytest-of-* keeps only the newest three
# sessions of anyone on the machine, and may remove a running deployment's home.
COMPAT_PYTEST := $(COMPAT_BIN)/pytest -q -p no:cacheprovider --basetemp=$(CURDIR)/.test-home/pytest-$(LINE)

$(COMPAT_STAMP): $(COMPAT_CONSTRAINTS) pyproject.toml $(SERVICE)/pyproject.toml
	$(PYTHON) -m venv $(COMPAT_VENV)
	$(COMPAT_BIN)/pip install --quiet --disable-pip-version-check --upgrade "pip>=24"
	$(COMPAT_BIN)/pip install --quiet --disable-pip-version-check -c $(COMPAT_CONSTRAINTS) -e './$(SERVICE)[test]' -e '.[test]'
	touch $(COMPAT_STAMP)

compat-venv: $(COMPAT_STAMP)

compat-unit: $(COMPAT_STAMP)
	$(COMPAT_TEST_PATH) $(COMPAT_PYTEST) $(COMPAT_UNIT_TESTS)

compat-examples: $(COMPAT_STAMP)
	$(COMPAT_BIN)/python scripts/demo.py --home .demo-$(LINE) $(EXAMPLES)

compat-deployment: $(COMPAT_STAMP) $(AZURITE)
	$(COMPAT_TEST_PATH) $(COMPAT_PYTEST) $(COMPAT_DEPLOYMENT_TESTS)

compat: compat-unit compat-examples compat-deployment

clean:
	rm -rf $(VENV) .venv-* .demo .demo-* node_modules .pytest_cache .ruff_cache .mypy_cache
