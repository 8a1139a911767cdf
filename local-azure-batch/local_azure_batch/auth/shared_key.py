"""Shared Key verification, computed exactly as the Batch service does.

The string to sign is the one azure-batch 15.x's ``BatchSharedKeyAuthPolicy`` builds (see the
project notes, §2.1); the service documentation's variant with lower-cased query parameter names
is accepted too, so other clients that follow the documentation work as well.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
from collections.abc import Mapping
from datetime import datetime, timedelta
from urllib.parse import parse_qsl

from local_azure_batch.lang.times import parse_rfc1123
from local_azure_batch.model.clock import utcnow
from local_azure_batch.model.errors import authentication_failed

HEADERS_TO_SIGN = (
    "content-encoding",
    "content-language",
    "content-length",
    "content-md5",
    "content-type",
    "date",
    "if-modified-since",
    "if-match",
    "if-none-match",
    "if-unmodified-since",
    "range",
)
# The documented tolerance between the request's date and the service clock.
MAX_CLOCK_SKEW = timedelta(minutes=15)


def string_to_sign(
    method: str,
    raw_path: str,
    raw_query: str,
    headers: Mapping[str, str],
    account_name: str,
    *,
    lowercase_query_names: bool = False,
) -> str:
    lowered = {name.lower(): value for name, value in headers.items() if value}
    return _string_to_sign(method, raw_path, parse_qsl(raw_query), lowered, account_name, lowercase_query_names)


def _string_to_sign(
    method: str,
    raw_path: str,
    query_pairs: list[tuple[str, str]],
    lowered: Mapping[str, str],
    account_name: str,
    lowercase_query_names: bool,
) -> str:
    content_length = lowered.get("content-length", "" if method in ("GET", "HEAD") else "0")
    values = [content_length if name == "content-length" else lowered.get(name, "") for name in HEADERS_TO_SIGN]
    text = method + "\n" + "\n".join(values) + "\n"
    ocp = sorted((name, value) for name, value in lowered.items() if "ocp-" in name)
    text += "".join(f"{name}:{value}\n" for name, value in ocp)
    text += f"/{account_name}{raw_path}"
    # parse_qs's view: the first value of each name; empty values are left out.
    query: dict[str, str] = {}
    for name, value in query_pairs:
        query.setdefault(name.lower() if lowercase_query_names else name, value)
    for name in sorted(query):
        if query[name]:
            text += f"\n{name}:{query[name]}"
    return text


def sign(key_b64: str, text: str) -> str:
    digest = hmac.new(_key_bytes(key_b64), text.encode("utf-8"), hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


@functools.lru_cache(maxsize=8)
def _key_bytes(key_b64: str) -> bytes:
    return base64.b64decode(key_b64)


def verify_shared_key(
    authorization: str,
    method: str,
    raw_path: str,
    raw_query: str,
    headers: Mapping[str, str],
    account_name: str,
    account_key: str,
    *,
    now: datetime | None = None,
) -> None:
    """Raise the service's 403 ``AuthenticationFailed`` unless the request is signed with the key."""
    scheme, _, credentials = authorization.partition(" ")
    name, sep, signature = credentials.partition(":")
    if scheme != "SharedKey" or not sep:
        raise authentication_failed("The Authorization header is not of the form 'SharedKey account:signature'.")
    if name != account_name:
        raise authentication_failed(f"The account name '{name}' in the Authorization header is unknown.")
    lowered = {key.lower(): value for key, value in headers.items() if value}
    date_text = lowered.get("ocp-date") or lowered.get("date")
    if not date_text:
        raise authentication_failed("The request has neither an ocp-date nor a Date header.")
    sent = parse_rfc1123(date_text)
    if sent is None:
        raise authentication_failed(f"The date header value '{date_text}' is not a valid RFC 1123 date.")
    current = now or utcnow()
    if abs(current - sent) > MAX_CLOCK_SKEW:
        raise authentication_failed(
            f"Request date header too old: '{date_text}'"
            if sent < current
            else f"Request date header is in the future: '{date_text}'"
        )
    query_pairs = parse_qsl(raw_query)
    try:
        # The SDK's string to sign first; the documented variant only when that one does not match.
        for lowercase in (False, True):
            text = _string_to_sign(method, raw_path, query_pairs, lowered, account_name, lowercase)
            if hmac.compare_digest(signature, sign(account_key, text)):
                return
    except binascii.Error:
        raise authentication_failed("The account key of the service is not valid base64.") from None
    raise authentication_failed(
        "The MAC signature found in the HTTP request is not the same as any computed signature."
    )
