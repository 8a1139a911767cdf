"""A local Azure Batch service: the Batch data-plane REST API served on your machine, tasks run as processes.

Run it with ``python -m local_azure_batch`` (or ``local-azure-batch``); from Python and tests, see
:mod:`local_azure_batch.testing`.
"""

__version__ = "0.1.0"
