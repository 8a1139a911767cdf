"""The proxy a client uses, read from the environment once, when the client is made.

azure-core's aiohttp transport hands ``trust_env=True`` to aiohttp by default, and aiohttp then reads the
proxy variables and ``~/.netrc`` again for every request, in a worker thread: in a triggerer polling a
thousand jobs that was a third of its CPU. A client talks to one host, so the answer is the same every
time. The variables are read as azure-core reads them (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``,
``NO_PROXY``, any case), but once.
"""

from __future__ import annotations

import urllib.request
from typing import Any
from urllib.parse import urlsplit


def proxy_kwargs(url: str) -> dict[str, Any]:
    """Client arguments that route requests to ``url`` through the environment's proxy, if any."""
    # Environment settings off: they would be read again for every request (see the module's docstring).
    kwargs: dict[str, Any] = {"use_env_settings": False}
    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]  # undocumented in typeshed
    if proxy and not bypass(parts.hostname or "", proxies):
        kwargs["proxies"] = {parts.scheme: proxy}
    return kwargs
