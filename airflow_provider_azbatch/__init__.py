"""Apache Airflow provider for Azure Batch."""

__version__ = "0.4.0"
