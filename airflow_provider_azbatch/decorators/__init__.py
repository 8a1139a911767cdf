"""``@task.azure_batch``: a Python function run on Azure Batch, its return value in XCom (see
:mod:`airflow_provider_azbatch.decorators.azure_batch`)."""

from airflow_provider_azbatch.decorators.azure_batch import azure_batch_task

__all__ = ["azure_batch_task"]
