"""``AzureBatchWaitTrigger``: sleep in the triggerer, not in a worker slot (e.g. while a quota clears)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent


class AzureBatchWaitTrigger(BaseTrigger):
    """Fires ``{"status": "retry", "reason": reason}`` at ``until`` (epoch seconds)."""

    def __init__(self, until: float, reason: str = "") -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Airflow leaves BaseTrigger.__init__ unannotated
        self.until = until
        self.reason = reason

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__qualname__}", {"until": self.until, "reason": self.reason}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        await asyncio.sleep(max(0.0, self.until - time.time()))
        yield TriggerEvent({"status": "retry", "reason": self.reason})
