"""What the faces of a run (the operator, the sensor) give their users alike: the connection, the run, its hook."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from airflow_provider_azbatch.hooks.batch import AzureBatchHook
from airflow_provider_azbatch.runs.lifecycle import JobRun
from airflow_provider_azbatch.runs.settings import RunSettings

if TYPE_CHECKING:
    from airflow_provider_azbatch.compat import Log


class RunFace:
    """Mixed into an Airflow operator whose ``__init__`` sets ``run_settings``: listed after the operator base, whose
    ``log`` the run writes to."""

    run_settings: RunSettings

    if TYPE_CHECKING:

        @property
        def log(self) -> Log: ...

    @property
    def azbatch_conn_id(self) -> str:
        return self.run_settings.azbatch_conn_id

    @cached_property
    def run(self) -> JobRun:
        return JobRun.of(self.run_settings, self.log)

    @property
    def hook(self) -> AzureBatchHook:
        return self.run.hook
