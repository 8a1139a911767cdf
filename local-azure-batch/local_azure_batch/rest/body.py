"""Reading request bodies as the service does (JSON, with its error codes)."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from .errors import invalid_body


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
