"""``azbatch-dev``: a local development environment for your own DAGs, in one command.

It starts the local Batch service (``local-azure-batch``, the ``[local]`` extra) and Blob storage (Azurite,
where Node.js is present), prepares an Airflow home whose ``azbatch_default`` connection points at both, and
runs either a whole local Airflow (API server and UI, scheduler, DAG processor, triggerer) on your DAGs
folder or one ``airflow dags test``. Nothing here imports Airflow: the command only starts its processes.
"""
