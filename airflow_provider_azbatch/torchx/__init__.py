"""The ``azure_batch`` TorchX scheduler and TorchX apps in DAGs (docs/howto/torchx.md).

A thin face over the provider's own parts: an AppDef becomes the operator's
:class:`~airflow_provider_azbatch.submission.request.JobRequest` (:mod:`.mapping`), which the run life cycle
(:mod:`airflow_provider_azbatch.runs`) prepares and submits; status, logs and cancel read the job through the hook.

Nothing here imports Airflow at module level except :mod:`.mapping`, :mod:`.service` and what they import:
``torchx runopts`` and the scheduler's registration stay free of Airflow, and an account given without an
Airflow connection keeps Airflow away from ``$AIRFLOW_HOME`` (:mod:`.account`).
"""
