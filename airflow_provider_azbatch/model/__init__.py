"""The provider's model of Batch: the values its reads return, and how tasks and jobs ended. No I/O, no Airflow."""
