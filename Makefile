# Two entry points for a fresh clone: `make demo` and `make test` (see README.md).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
AZURITE := node_modules/.bin/azurite
SERVICE := local-azure-batch
# Tests find the venv's tools (airflow, the local Batch service) and Azurite on PATH.
TEST_PATH := PATH="$(CURDIR)/$(BIN):$(CURDIR)/node_modules/.bin:$$PATH"
# The newest Airflow line: `make demo`'s and `make py`'s (constraints/airflow-3.3*.txt).
NEWEST_LINE := 3.3
# The Pythons the packages declare (tests/test_pythons.py checks): `make demo` runs on any of them.
PYTHONS := 3.10 3.11 3.12 3.13
# PYTHON_VERSION=3.12: `make demo`, `make compat` and `make py` on that Python (scripts/find_python.sh finds it).
PYTHON_VERSION ?=
# Only the command line's: Docker's python images set PYTHON_VERSION to their own X.Y.Z.
ifeq ($(origin PYTHON_VERSION),environment)
PYTHON_VERSION :=
endif

.PHONY: demo demo-venv test lint typecheck venv clean bench bench-run bench-view bench-output bench-autoscale bench-torchx-startup docs docs-venv compat compat-venv compat-unit compat-examples
.PHONY: compat-deployment py py-venv py-unit py-examples uv

# `make test`'s venv, on python3 (Python 3.11: constraints.txt is resolved for it): both distributions of this
# repository, editable, with the test, dev and TorchX extras; and PyTorch for the two-node rendezvous tests
# (tests/workloads/test_torch_rendezvous.py, tests/torchx), only in this venv. constraints.txt pins
# torch==2.13.0, which PyTorch's CPU build 2.13.0+cpu satisfies too (a local version label): pip takes the CPU
# build where the machine's pip sees one (a wheel directory, or PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu:
# about 200 MB), else the package index's build (with CUDA's libraries, about 3.5 GB).
$(STAMP): pyproject.toml $(SERVICE)/pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11) and "make test needs Python 3.11, the Python of constraints.txt: make test PYTHON=python3.11 (make demo runs on 3.10-3.13)")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --upgrade "pip>=24"
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e './$(SERVICE)[test]' -e '.[test,dev,torchx]' torch
	touch $(STAMP)

$(AZURITE): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $(AZURITE)

venv: $(STAMP)

# `make demo`'s venv, its own: the provider and the local Batch service, editable, without extras (no test or
# dev tools, no TorchX, no PyTorch, no docs tools), from the newest line's set for the Python that runs it:
# $(PYTHON), or PYTHON_VERSION=3.12 (scripts/find_python.sh). One venv per Python: .venv-demo-py3.12.
# Evaluated only for these targets: finding the Python runs it.
ifneq ($(filter demo demo-venv,$(MAKECMDGOALS)),)
DEMO_PYTHON := $(if $(PYTHON_VERSION),$(shell scripts/find_python.sh $(PYTHON_VERSION)),$(PYTHON))
DEMO_XY := $(if $(DEMO_PYTHON),$(shell $(DEMO_PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])'))
ifeq ($(filter $(DEMO_XY),$(PYTHONS)),)
$(error make demo runs on Python $(PYTHONS); $(or $(DEMO_PYTHON),PYTHON) is $(or $(DEMO_XY),not a working Python). Name one: make demo PYTHON=/path/to/python3.12, or make demo PYTHON_VERSION=3.12 (pyenv's build or python3.12 on PATH))
endif
DEMO_SET := constraints/airflow-$(NEWEST_LINE)
DEMO_CONSTRAINTS := $(firstword $(wildcard $(DEMO_SET)-py$(DEMO_XY).txt) $(DEMO_SET).txt)
DEMO_VENV := .venv-demo-py$(DEMO_XY)
DEMO_STAMP := $(DEMO_VENV)/.installed
$(DEMO_STAMP): pyproject.toml $(SERVICE)/pyproject.toml $(DEMO_CONSTRAINTS)
	@echo "== Installing the demo's venv ($(DEMO_VENV), Python $(DEMO_XY)) from $(DEMO_CONSTRAINTS)"
	rm -rf $(DEMO_VENV)
	$(DEMO_PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/pip install --quiet --disable-pip-version-check --upgrade "pip>=24"
	$(DEMO_VENV)/bin/pip install --quiet --disable-pip-version-check -c $(DEMO_CONSTRAINTS) -e './$(SERVICE)' -e .
	touch $(DEMO_STAMP)
endif

demo-venv: $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(DEMO_VENV)/bin/python scripts/demo.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# `make test`'s parts, each timed as it ends and all of them at the end (scripts/timed.sh): lint, types, then each
# suite in two parts (docs/development.md, "The test suite's parts"). First what may share the machine, in
# $(TEST_WORKERS) processes (pytest-xdist; each file's tests in one process, which starts its own local Batch service,
# Azurite and Airflow database): most tests wait on the local Batch service's tasks and nodes, so more processes
# than cores keep both cores busy. Then the tests marked `serial`, one at a time and alone: real Airflow
# deployments (tests/airflow_run, the `airflow_run` marker) and tests that bound how long something takes.
TEST_WORKERS ?= 4
TIMED := scripts/timed.sh
PARALLEL := -n $(TEST_WORKERS) --dist loadfile -m "not serial"
test:
	@$(TIMED) --begin
	@$(TIMED) "Install: .venv from constraints.txt" $(MAKE) --no-print-directory venv
	@$(TIMED) "Install: Azurite (npm ci)" $(MAKE) --no-print-directory $(AZURITE)
	@$(TIMED) "Lint (ruff)" $(MAKE) --no-print-directory lint
	@$(TIMED) "Types (mypy)" $(MAKE) --no-print-directory typecheck
	@$(TIMED) "Local Batch service: parallel part" env $(TEST_PATH) $(BIN)/pytest $(PARALLEL) $(SERVICE)/tests
	@$(TIMED) "Local Batch service: serial part" env $(TEST_PATH) $(BIN)/pytest -m serial $(SERVICE)/tests
	@$(TIMED) "Provider: parallel part" env $(TEST_PATH) $(BIN)/pytest $(PARALLEL)
	@$(TIMED) "Provider: serial part (real deployments, timing)" env $(TEST_PATH) $(BIN)/pytest -m serial
	@$(TIMED) --end

# The documentation site (docs/, Python 3.11+): built with warnings as errors and nitpicky references, then every
# internal link and anchor of the built HTML checked, offline. The site is docs/_build/html/index.html.
DOCS_STAMP := $(VENV)/.docs-installed
$(DOCS_STAMP): $(STAMP) pyproject.toml constraints.txt
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[docs]'
	touch $(DOCS_STAMP)

docs-venv: $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	rm -rf docs/_build/html
	$(BIN)/sphinx-build -W -n --keep-going -q -b html docs docs/_build/html
	$(BIN)/python docs/_ext/check_links.py docs/_build/html
	$(BIN)/linkchecker --no-status docs/_build/html/index.html

# The benchmarks (bench/README.md): one target per results file, each written whole and stamped by one run of its
# script (bench/results_file.py); `make bench` runs them all, one after the other (about two hours on 2 cores,
# bench-output alone about 70 minutes).
# BENCH_ARGS=--quick: a smoke run of run.py and view.py, written to bench/.out instead.
bench: bench-run bench-view bench-output bench-autoscale bench-torchx-startup

bench-run: $(STAMP)  # bench/results.md: the trigger at scale, against the official trigger
	$(BIN)/python bench/run.py $(BENCH_ARGS)

bench-view: $(STAMP)  # bench/view-results.md: the account view on pools that have nodes
	$(BIN)/python bench/view.py $(BENCH_ARGS)

bench-output: $(STAMP)  # bench/output-results.md: live output at scale
	$(BIN)/python bench/output.py

bench-autoscale: $(STAMP)  # bench/autoscale-results.md: autoscaled pools against a fixed one
	$(BIN)/python bench/autoscale.py --results

bench-torchx-startup: $(STAMP)  # bench/torchx-startup-results.md: torchx status on azure_batch against local_cwd
	$(BIN)/python bench/torchx_startup.py

# uv: for the other Pythons' venvs (below); scripts/constraints.py resolves the dependency sets with the same
# version (tests/test_pythons.py). Installed into .venv-uv by pip, as the script does when uv is not on PATH.
UV_VERSION := 0.13.9
UV := .venv-uv/bin/uv
# No uv.toml of the machine; the cache on another filesystem than the checkout: copies, without a warning.
UV_RUN := UV_NO_CONFIG=1 UV_LINK_MODE=copy $(UV)

$(UV):
	$(PYTHON) -m venv .venv-uv
	.venv-uv/bin/pip install --quiet --disable-pip-version-check "uv==$(UV_VERSION)"

uv: $(UV)

# Older Airflow lines and the dependency floors (docs/reference/airflow-lines.md): `make compat LINE=3.0`.
# LINE is 3.0, 3.1, 3.2, 3.3 (constraints/airflow-LINE.txt) or lowest-direct; each gets its own venv,
# with uv's cache shared by all of them. The provider's whole suite runs in `make test` only.
LINE ?= 3.2
# PYTHON_VERSION=3.12 (any X.Y) runs a line on that Python instead of $(PYTHON), in .venv-LINE-py3.12, from
# the line's set for that Python (constraints/airflow-LINE-py3.12.txt) or, where scripts/constraints.py wrote
# none (the same pins), the line's own. CI runs the newest line so on each other Python (`make py` below).
COMPAT_SUFFIX := $(if $(PYTHON_VERSION),-py$(PYTHON_VERSION))
COMPAT_SET := constraints/$(if $(filter lowest-direct,$(LINE)),lowest-direct,airflow-$(LINE))
COMPAT_CONSTRAINTS := $(firstword $(wildcard $(COMPAT_SET)$(COMPAT_SUFFIX).txt) $(COMPAT_SET).txt)
COMPAT_VENV := .venv-$(LINE)$(COMPAT_SUFFIX)
COMPAT_BIN := $(COMPAT_VENV)/bin
COMPAT_STAMP := $(COMPAT_VENV)/.installed
COMPAT_TEST_PATH := PATH="$(CURDIR)/$(COMPAT_BIN):$(CURDIR)/node_modules/.bin:$$PATH"
# Pure logic, what differs between lines (one process each), a retry reattaching without 3.3's task state
# store, a cancelled trigger telling a kill from a restart, and what ends a wait when tasks fail (a skipped task,
# blocked dependents) with each line's exceptions; the job watcher's firing.
WHEN_TASKS_FAIL := tests/provider/test_when_tasks_fail.py
COMPAT_UNIT_TESTS ?= tests/unit tests/compute tests/lines tests/provider/test_trigger_kill.py tests/provider/test_job_events.py \
	tests/provider/test_reattach_and_sensor.py::test_a_later_try_reattaches_to_the_running_job \
	"$(WHEN_TASKS_FAIL)::test_a_task_waiting_on_a_failed_task_ends_the_wait_naming_both[sync]" \
	"$(WHEN_TASKS_FAIL)::test_skip_on_exit_code_skips_the_airflow_task_and_a_mixed_failure_still_fails[sync]"
# The OpenLineage events of runs (dag.test() with the file transport) with the OpenLineage provider each older line's
# set takes; not the floors' set, whose OpenLineage provider does not load on the newest Airflow (airflow-lines.md).
COMPAT_UNIT_TESTS += $(if $(filter 3.0 3.1 3.2,$(LINE)),$(if $(PYTHON_VERSION),,tests/lineage))
EXAMPLES ?= example_azbatch_hello example_azbatch_deferrable
# Scheduler + triggerer (and Azurite, the cluster's storage): the deferrable example's output in the task log
# (and its metric), a deferred @task.azure_batch function, and each feature that differs between lines: log
# sources, the deferred kill (marked failed or success, cleared), checkpoints across a triggerer restart, the connection form,
# a DAG scheduled on a run's output asset, and a DAG started by a job watcher (an asset watcher) once per job,
# across a triggerer restart. Each row of docs/reference/airflow-lines.md names its tests here (tests/lines).
REAL_AIRFLOW := tests/airflow_run/test_real_airflow.py
# Two triggerers on PostgreSQL, one crashed, one frozen, one stopped: a handover keeps every line and kills no job.
TWO_TRIGGERERS := tests/airflow_run/test_two_triggerers.py
COMPAT_DEPLOYMENT_TESTS ?= $(REAL_AIRFLOW)::test_output_streams_while_deferred_and_appears_once \
	$(REAL_AIRFLOW)::test_first_output_appears_within_a_poll_of_the_trigger_start \
	$(REAL_AIRFLOW)::test_marking_a_deferred_task_failed_terminates_its_job \
	$(REAL_AIRFLOW)::test_marking_a_deferred_task_success_terminates_its_job \
	$(REAL_AIRFLOW)::test_clearing_a_deferred_task_ends_its_job_and_the_next_try_runs_one \
	$(REAL_AIRFLOW)::test_a_triggerer_restart_loses_no_line \
	$(REAL_AIRFLOW)::test_the_connection_form_as_the_ui_receives_it_shows_no_null \
	$(REAL_AIRFLOW)::test_a_deferred_taskflow_function_returns_what_the_dag_branches_on \
	$(REAL_AIRFLOW)::test_an_asset_scheduled_dag_runs_once_per_training_run_with_its_job_and_metrics \
	$(REAL_AIRFLOW)::test_a_watcher_scheduled_dag_runs_once_per_training_job_completed_outside_airflow \
	$(TWO_TRIGGERERS)
# Each line's pytest temporary files in the checkout: a shared /tmp/pytest-of-* keeps only the newest three
# sessions of anyone on the machine, and may remove a running deployment's home.
COMPAT_PYTEST := $(COMPAT_BIN)/pytest -q -p no:cacheprovider --basetemp=$(CURDIR)/.test-home/pytest-$(LINE)$(COMPAT_SUFFIX)

# A line's venv is installed by uv, with the same pins as pip would take from the set (fully pinned): about 6 s of
# CPU where pip takes over a minute, which keeps each line's and each Python's part of CI short; pip installs
# `make test`'s and `make demo`'s venvs, and the wheels in tests/devenv/test_from_wheels.py, as users install.
# The interpreter: $(PYTHON), or for PYTHON_VERSION scripts/find_python.sh's (pyenv's build or pythonX.Y on PATH).
# Compiled at install, as pip does: where PYTHONDONTWRITEBYTECODE is set, Python would compile Airflow from source in
# every process (11 s to import it), and an API server's workers miss uvicorn's 5 s start-up ping for ever.
$(COMPAT_STAMP): $(COMPAT_CONSTRAINTS) pyproject.toml $(SERVICE)/pyproject.toml | $(UV)
ifeq ($(PYTHON_VERSION),)
	$(PYTHON) -m venv --without-pip $(COMPAT_VENV)
else
	python=$$(scripts/find_python.sh $(PYTHON_VERSION)) && "$$python" -m venv --without-pip $(COMPAT_VENV)
endif
	$(UV_RUN) pip install --quiet --compile-bytecode --python $(COMPAT_BIN)/python -c $(COMPAT_CONSTRAINTS) -e './$(SERVICE)[test]' -e '.[test,torchx]'
	touch $(COMPAT_STAMP)

compat-venv: $(COMPAT_STAMP)

compat-unit: $(COMPAT_STAMP)
	$(COMPAT_TEST_PATH) $(COMPAT_PYTEST) $(COMPAT_UNIT_TESTS)

compat-examples: $(COMPAT_STAMP)
	$(COMPAT_BIN)/python scripts/demo.py --home .demo-$(LINE)$(COMPAT_SUFFIX) $(EXAMPLES)

compat-deployment: $(COMPAT_STAMP) $(AZURITE)
	$(COMPAT_TEST_PATH) $(COMPAT_PYTEST) $(COMPAT_DEPLOYMENT_TESTS)

compat: compat-unit compat-examples compat-deployment

# Every other supported Python on the newest line (docs/installation.md): `make py PYTHON_VERSION=3.12`
# (3.10, 3.12, 3.13; 3.11 is $(PYTHON), `make test`'s) runs the unit tests and the hello example there.
py-venv py-unit py-examples:
	@test -n "$(PYTHON_VERSION)" || { echo "make $@ needs PYTHON_VERSION, e.g. PYTHON_VERSION=3.12" >&2; exit 2; }
	@$(MAKE) --no-print-directory compat-$(@:py-%=%) LINE=$(NEWEST_LINE) EXAMPLES=example_azbatch_hello

py: py-unit py-examples

clean:
	rm -rf $(VENV) .venv-* .demo .demo-* docs/_build node_modules .pytest_cache .ruff_cache .mypy_cache
