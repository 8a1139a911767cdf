"""Registers the `azure_batch` TorchX scheduler (torchx-nightly's namespace-package plugin channel).

Only the decorated factory lives here: torchx imports every module of this namespace on start-up, so the
scheduler (and Airflow under it) is imported only when the factory is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchx.plugins import register

if TYPE_CHECKING:
    from airflow_provider_azbatch.torchx.scheduler import AzureBatchScheduler


@register.scheduler()
def azure_batch(session_name: str, **kwargs: object) -> AzureBatchScheduler:
    """The `azure_batch` scheduler. torchx passes every TORCHX_* environment variable as a keyword: ignored."""
    from airflow_provider_azbatch.torchx.scheduler import AzureBatchScheduler

    return AzureBatchScheduler(session_name)
