"""The GPU tutorial's offline run (docs/tutorials/gpu-training.md), as a reader runs it: `azbatch-dev test` on the
example DAGs folder, with the local Batch service and Azurite (the `[torchx]` extra installed, as `make venv` does)."""

from __future__ import annotations

import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.devenv.devenv_process import DevEnv
from tests.devenv.test_devenv import assert_nothing_left, batch_lines

pytestmark = [pytest.mark.airflow_run, pytest.mark.azurite]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# The page's command, run as it is written from a folder holding the examples (a clone's root holds them too).
TRAINING_OFFLINE = "azbatch-dev test example_azbatch_training example_dags"


def test_the_training_pipeline_runs_green_offline_as_the_tutorial_says(tmp_path):
    shutil.copytree(ROOT / "example_dags", tmp_path / "example_dags", ignore=shutil.ignore_patterns("__pycache__"))
    env = DevEnv(TRAINING_OFFLINE, tmp_path, BIN)
    try:
        assert env.wait(timeout=600) == 0, env.output[-6000:]
        assert "== airflow dags test example_azbatch_training exited with 0" in env.output
        # What the page says the reader sees.
        shards = [f"shard {n}/4: wrote 500 samples" for n in range(4)]
        assert batch_lines(env.lines, shards, whole=False) == Counter(shards)
        assert batch_lines(env.lines, ["training on 2000 samples"], whole=False) == Counter(
            ["training on 2000 samples"]
        )
        assert any("[main] launch: torchrun --nnodes=2 --rdzv_endpoint=" in line for line in env.lines)
        assert any("[main] model from 2 nodes, 2000 samples: w=" in line for line in env.lines)
        assert sum("Cost estimate: $" in line for line in env.lines) == 3
        # The branch: promote ran (with the run's id, from its context), hold was skipped.
        assert "Done. Returned value was: promoted the model of manual__" in env.output
        assert "starting task_id=hold " not in env.output
        assert_nothing_left(env)
    finally:
        env.kill()
