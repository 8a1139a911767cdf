"""``python -m local_azure_batch``: run the local Batch service."""

from .cli import main

raise SystemExit(main())
