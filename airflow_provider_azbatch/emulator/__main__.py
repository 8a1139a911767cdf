"""``python -m airflow_provider_azbatch.emulator``: run the local Batch service."""

from .cli import main

raise SystemExit(main())
