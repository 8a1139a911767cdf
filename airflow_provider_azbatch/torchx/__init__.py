"""The ``azure_batch`` TorchX scheduler and TorchX apps in DAGs (docs/howto/torchx.md).

A thin face over the provider's own parts: an AppDef becomes the operator's
:class:`~airflow_provider_azbatch.submission.request.JobRequest` (:mod:`.mapping`), which the run life cycle
(:mod:`airflow_provider_azbatch.runs`) prepares and submits; status, logs and cancel read the job through the hook.

Nothing here imports Airflow at module level: ``torchx runopts`` and the scheduler's registration stay free of
it, and a command line on an account given by URL or by an ``AIRFLOW_CONN_<ID>`` variable never imports it
(:mod:`airflow_provider_azbatch.airflowless`, :mod:`.account`); the DAG operator runs in Airflow, of course.
"""
