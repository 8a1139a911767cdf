"""Response building: headers, OData metadata, paging and ``$select`` as the service does them."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, cast
from urllib.parse import quote, urlencode

from aiohttp import web

from local_azure_batch.model.clock import iso, rfc1123, utcnow
from local_azure_batch.model.errors import BatchServiceError, invalid_query

from .odata_filter import CompiledFilter, ODataFilterError, compile_filter
from .query_options import options_for

JSON_TYPE = "application/json; odata=minimalmetadata"
MAX_RESULTS = 1000
ERROR_METADATA = "Microsoft.Azure.Batch.Protocol.Entities.Container.errors/@Element"


class Entity(Protocol):
    """A pool, node, job or task as the REST layer renders it."""

    @property
    def path(self) -> str: ...

    def to_wire(self, base_url: str, fields: Collection[str] | None = None) -> dict[str, Any]: ...


class VersionedEntity(Entity, Protocol):
    etag: str
    last_modified: datetime


def base_url(request: web.Request) -> str:
    return f"{request.scheme}://{request.host}"


def common_headers(request: web.Request) -> dict[str, str]:
    return {"request-id": request["request_id"], "DataServiceVersion": "3.0"}


def json_response(
    request: web.Request,
    body: Mapping[str, Any],
    metadata: str,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
) -> web.Response:
    payload = {"odata.metadata": f"{base_url(request)}/$metadata#{metadata}", **body}
    return web.Response(
        status=status,
        body=json.dumps(payload).encode(),
        headers={"Content-Type": JSON_TYPE, **common_headers(request), **(headers or {})},
    )


def entity_headers(entity: VersionedEntity) -> dict[str, str]:
    return {"ETag": entity.etag, "Last-Modified": rfc1123(entity.last_modified)}


def entity(request: web.Request, item: Entity, metadata: str, headers: Mapping[str, str] | None = None) -> web.Response:
    """A GET of one entity, with ``$select``; with its ETag and Last-Modified if it has them (nodes do not)."""
    fields = parse_select(request)
    body = select(item.to_wire(base_url(request), fields), fields)
    if getattr(item, "etag", None) is not None:
        headers = {**entity_headers(cast(VersionedEntity, item)), **(headers or {})}
    return json_response(request, body, metadata, headers=headers)


def entities(request: web.Request, items: Sequence[Entity], metadata: str) -> web.Response:
    base = base_url(request)
    return list_response(request, items, lambda item, fields: item.to_wire(base, fields), metadata)


def created(request: web.Request, item: VersionedEntity) -> web.Response:
    url = f"{base_url(request)}{item.path}"
    return empty(request, 201, {"DataServiceId": url, "Location": url, **entity_headers(item)})


def changed(request: web.Request, item: VersionedEntity, status: int) -> web.Response:
    """The answer to an operation on an entity: no body, the entity's new ETag."""
    return empty(request, status, {"DataServiceId": f"{base_url(request)}{request.path}", **entity_headers(item)})


def empty(request: web.Request, status: int, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(status=status, headers={**common_headers(request), **(headers or {})})


async def headers_only(
    request: web.Request, status: int, headers: Mapping[str, str], content_length: int
) -> web.StreamResponse:
    """A HEAD answer that still tells the length of what a GET would return."""
    response = web.StreamResponse(status=status, headers=headers)
    response.content_length = content_length
    await response.prepare(request)
    await response.write_eof()
    return response


async def error_response(request: web.Request, error: BatchServiceError) -> web.StreamResponse:
    body: dict[str, Any] = {
        "odata.metadata": f"{base_url(request)}/$metadata#{ERROR_METADATA}",
        "code": error.code,
        "message": {
            "lang": "en-US",
            "value": f"{error.message}\nRequestId:{request['request_id']}\nTime:{iso(utcnow())}",
        },
    }
    if error.values:
        body["values"] = [{"key": key, "value": value} for key, value in error.values]
    data = json.dumps(body).encode()
    headers = {"Content-Type": JSON_TYPE, **common_headers(request), **error.headers}
    if "client-request-id" in request.headers:
        headers["client-request-id"] = request.headers["client-request-id"]
    if request.method == "HEAD":
        return await headers_only(request, error.status, headers, len(data))
    return web.Response(status=error.status, body=data, headers=headers)


def select(item: dict[str, Any], fields: Sequence[str] | None) -> dict[str, Any]:
    if not fields:
        return item
    return {name: item[name] for name in fields if name in item}


def parse_select(request: web.Request) -> list[str] | None:
    text = request.query.get("$select")
    if not text:
        return None
    return [part.strip() for part in text.split(",") if part.strip()] or None


def parse_filter(request: web.Request) -> CompiledFilter | None:
    """The request's ``$filter``, held to what its operation documents (``query_options.py``)."""
    text = request.query.get("$filter")
    if not text:
        return None
    options = options_for(request.get("operation", ""))
    try:
        if options.filter is None:
            # check_query_options refused a $filter to any operation that does not take one.
            return compile_filter(text)
        return compile_filter(text, options.filter, options.name)
    except ODataFilterError as exc:
        raise invalid_query("$filter", text, str(exc)) from None


def parse_max_results(request: web.Request) -> int:
    text = request.query.get("maxresults")
    if text is None:
        return MAX_RESULTS
    try:
        value = int(text)
    except ValueError:
        raise invalid_query("maxresults", text, "The value must be an integer between 1 and 1000.") from None
    if not 1 <= value <= MAX_RESULTS:
        raise invalid_query("maxresults", text, "The value must be an integer between 1 and 1000.")
    return value


def list_response(
    request: web.Request,
    items: Sequence[Any],
    render: Callable[[Any, Collection[str] | None], dict[str, Any]],
    metadata: str,
) -> web.Response:
    """One page of a list, with an absolute ``odata.nextLink`` carrying every parameter it needs.

    ``render(item, fields)`` may leave out top-level fields that are not in ``fields`` (None: all): only
    those the ``$select`` and the ``$filter`` name are rendered.
    """
    where = parse_filter(request)
    fields = parse_select(request)
    needed = None if fields is None else {*fields, *(where.fields if where is not None else ())}
    page_size = parse_max_results(request)
    skip_text = request.query.get("$skiptoken", "0")
    try:
        skip = int(skip_text)
    except ValueError:
        raise invalid_query("$skiptoken", skip_text, "The skip token is not one this service issued.") from None
    page: list[dict[str, Any]] = []
    position = skip
    # Rendering is the expensive part; a filter that needs rendered fields pays for it.
    while position < len(items) and len(page) < page_size:
        rendered = render(items[position], needed)
        position += 1
        if where is None or where(rendered):
            page.append(select(rendered, fields))
    if where is not None:
        # Only advertise a next page if something further would match.
        while position < len(items) and not where(render(items[position], needed)):
            position += 1
    body: dict[str, Any] = {"value": page}
    if position < len(items):
        query = {key: value for key, value in request.query.items() if key not in ("$skiptoken", "api-version")}
        query["$skiptoken"] = str(position)
        encoded = urlencode(
            {"api-version": request.query.get("api-version", ""), **query}, quote_via=quote, safe="$,()'"
        )
        body["odata.nextLink"] = f"{base_url(request)}{request.path}?{encoded}"
    return json_response(request, body, metadata)


def plain(item: Any, fields: Collection[str] | None) -> Any:
    """Render a list item that is already its JSON."""
    return item
