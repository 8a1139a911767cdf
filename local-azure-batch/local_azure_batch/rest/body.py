"""Reading request bodies as the service does (JSON, with its error codes)."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from local_azure_batch.model.errors import invalid_body

# "The total serialized size of this collection must be less than 1MB" (add task collection, the one
# documented limit); applied to every request body, which is then answered 413 RequestBodyTooLarge.
MAX_BODY_BYTES = 1024 * 1024


async def read_json(request: web.Request, *, optional: bool = False) -> Any:
    raw = await request.read()
    if not raw.strip():
        if optional:
            return {}
        raise invalid_body("The request body is empty.")
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise invalid_body(f"The request body is not valid JSON: {exc}") from None
