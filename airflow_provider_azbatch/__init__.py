"""Apache Airflow provider for Azure Batch."""

__version__ = "0.5.0"
