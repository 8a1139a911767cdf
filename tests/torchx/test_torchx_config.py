"""The ``.torchxconfig`` files docs/howto/torchx.md shows, read by TorchX's own loader as ``torchx`` reads them.
(tests/torchx/test_torchx_accounts.py runs an app on the account of the second one.)"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

config = pytest.importorskip("torchx.runner.config", reason="the [torchx] extra is not installed")

from torchx.cli.argparse_util import torchxconfig  # noqa: E402
from torchx.cli.cmd_run import CmdRun  # noqa: E402
from torchx.schedulers import get_scheduler_factories  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


def _torchx_run_scheduler(monkeypatch: pytest.MonkeyPatch, torchxconfig_file: str) -> str:
    """The scheduler ``torchx run utils.echo`` (no ``-s``) uses with this .torchxconfig ("": none)."""
    monkeypatch.setenv("TORCHXCONFIG", torchxconfig_file)
    monkeypatch.setattr(torchxconfig, "_subcmd_configs", {})  # TorchX reads a file once per process
    parser = argparse.ArgumentParser()
    CmdRun().add_arguments(parser)
    return parser.parse_args(["utils.echo"]).scheduler


def test_the_default_scheduler_config_makes_local_cwd_the_run_default(monkeypatch):
    assert _torchx_run_scheduler(monkeypatch, "") == "azure_batch"  # the first registered plugin
    assert _torchx_run_scheduler(monkeypatch, str(EXAMPLES / "torchxconfig_default_scheduler.ini")) == "local_cwd"


def test_the_account_config_sets_azure_batch_run_options():
    cfg: dict = {}
    with (EXAMPLES / "torchxconfig_account.ini").open() as f:
        config.load("azure_batch", f, cfg)  # skips (with a warning) what is not a run option
    assert cfg == {
        "account_url": "https://mybatch.westeurope.batch.azure.com",
        "storage_account_url": "https://mystorage.blob.core.windows.net",
    }
    resolved = get_scheduler_factories()["azure_batch"]("docs").run_opts().resolve(cfg)
    assert resolved.get("account_url") == cfg["account_url"]
    assert resolved.get("storage_account_url") == cfg["storage_account_url"]


def test_container_options_with_equals_signs_come_from_the_config():
    cfg: dict = {}
    with (EXAMPLES / "torchxconfig_container_options.ini").open() as f:
        config.load("azure_batch", f, cfg)
    resolved = get_scheduler_factories()["azure_batch"]("docs").run_opts().resolve(cfg)
    assert resolved.get("container_run_options") == "--ulimit nofile=65536:65536 --ulimit stack=67108864"
    assert resolved.get("shm_size") == "64g"
