"""One ``azure.batch.aio`` client per connection per event loop, shared by every trigger using it.

A triggerer may run a thousand triggers in one event loop; each opening its own client would mean a
thousand connection pools. Triggers lease the client of their connection and the last one to leave
closes it (and its credential).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from airflow_provider_azbatch.hooks.connection import BatchConnectionSettings
from airflow_provider_azbatch.hooks.credentials import build_credential, client_kwargs


@dataclass
class _Entry:
    client: Any
    credential: Any
    users: int = 0


_clients: dict[tuple[int, str], _Entry] = {}
_lock: asyncio.Lock | None = None
_lock_loop: int | None = None


def _loop_lock() -> asyncio.Lock:
    global _lock, _lock_loop
    loop_id = id(asyncio.get_running_loop())
    if _lock is None or _lock_loop != loop_id:
        _lock, _lock_loop = asyncio.Lock(), loop_id
    return _lock


async def connection_settings(conn_id: str) -> BatchConnectionSettings:
    """The connection's settings, read without blocking the event loop."""
    from airflow.sdk import BaseHook

    from airflow_provider_azbatch.hooks.batch import _mask

    connection = await BaseHook.aget_connection(conn_id)
    settings = BatchConnectionSettings.from_connection(connection)
    _mask(settings.secrets)
    return settings


@contextlib.asynccontextmanager
async def shared_client(conn_id: str) -> AsyncIterator[Any]:
    """Lease the shared aio Batch client of ``conn_id`` for the running event loop."""
    from azure.batch.aio import BatchClient as AsyncBatchClient

    key = (id(asyncio.get_running_loop()), conn_id)
    async with _loop_lock():
        entry = _clients.get(key)
        if entry is None:
            settings = await connection_settings(conn_id)
            credential = build_credential(settings, asynchronous=True)
            client = AsyncBatchClient(settings.account_url, credential, **client_kwargs(settings))
            entry = _clients[key] = _Entry(client, credential)
        entry.users += 1
    try:
        yield entry.client
    finally:
        async with _loop_lock():
            entry.users -= 1
            if entry.users == 0 and _clients.get(key) is entry:
                del _clients[key]
                await entry.client.close()
                close = getattr(entry.credential, "close", None)
                if close is not None:
                    result = close()
                    if asyncio.iscoroutine(result):
                        await result


def open_client_count() -> int:
    """How many shared clients are open (for tests and diagnostics)."""
    return len(_clients)
