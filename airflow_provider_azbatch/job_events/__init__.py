"""Batch jobs as events: which completed jobs a watcher fires for (:mod:`.filters`), what its event carries
(:mod:`.outcome`) and the cursor that makes each job fire once across restarts (:mod:`.cursor`). The trigger is
:class:`airflow_provider_azbatch.triggers.job_events.AzureBatchJobCompletedTrigger`."""
