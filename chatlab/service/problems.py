"""Every error the service answers is an RFC 9457 problem JSON with a ``detail`` that says what to do.

Whatever refuses a request (a bad body or parameter, a missing key, the rate limit, a failed
``If-Match``, a reused ``Idempotency-Key``, a failing store, an unknown endpoint) raises; the
handlers here turn each into the same problem shape, so a client needs one way to read errors.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.routing import Match

from ..stores import StoreError
from ..stores.base import IdempotencyKeyReused, VersionMismatch
from ..vocabulary import Refused
from .responses import json_response
from .security.conditions import etag

PROBLEM_JSON = "application/problem+json"
_TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    408: "Request Timeout",
    412: "Precondition Failed",
    413: "Content Too Large",
    414: "URI Too Long",
    415: "Unsupported Media Type",
    421: "Misdirected Request",
    422: "Unprocessable Content",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}


def _problem_response(status: int, title: str, detail: str, errors: list[dict[str, Any]] | None = None) -> Response:
    """The problem JSON; ``errors`` has one entry per invalid field of a body, when it helps."""
    body: dict[str, Any] = {"title": title, "status": status, "detail": detail}
    if errors:
        body["errors"] = errors
    response = json_response(body)
    response.status_code = status
    response.headers["content-type"] = PROBLEM_JSON
    return response


def problem_response(status: int, detail: str) -> Response:
    """The problem JSON of a refusal made outside the routes (where raising would not reach the handlers)."""
    return _problem_response(status, _TITLES.get(status, "Error"), detail)


def add_error_handlers(app: FastAPI) -> None:
    """Answer every error below as problem JSON, FastAPI's and Starlette's own included."""
    for exception, handler in _HANDLERS.items():
        app.add_exception_handler(exception, handler)


async def _refused(_: Request, exc: Refused) -> Response:
    title = _TITLES.get(exc.status) or HTTPStatus(exc.status).phrase
    response = _problem_response(exc.status, title, exc.detail, exc.errors)
    response.headers.update(exc.headers)
    return response


async def _precondition_failed(_: Request, exc: VersionMismatch) -> Response:
    """412 with the current ``ETag``, so the client knows the version it has to redo its change on."""
    response = _problem_response(
        412,
        _TITLES[412],
        "the conversation changed since the If-Match version (it is now at the ETag of this answer): "
        "GET it again, redo your change and retry; nothing was written",
    )
    response.headers["ETag"] = etag(exc.current)
    return response


async def _idempotency_key_reused(_: Request, exc: IdempotencyKeyReused) -> Response:
    return _problem_response(
        422,
        _TITLES[422],
        "this Idempotency-Key was already used for an append of other messages to this conversation: "
        "use a new key for each new append; nothing was written",
    )


async def _invalid_parameter(_: Request, exc: RequestValidationError) -> Response:
    """400, not FastAPI's 422: an invalid parameter is a bad request, as everywhere else in the service."""
    detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
    return _problem_response(400, _TITLES[400], detail)


#: Seconds a client is asked to wait after a store failure (``Retry-After`` of the 503).
STORE_RETRY_AFTER = 1


async def _store_unavailable(_: Request, exc: StoreError) -> Response:
    response = _problem_response(503, _TITLES[503], f"the history store failed: {exc}; retry later")
    response.headers["Retry-After"] = str(STORE_RETRY_AFTER)
    return response


async def _http_error(request: Request, exc: HTTPException) -> Response:
    """Starlette's 404 and 405, with a hint where the API is described."""
    response = _problem_response(exc.status_code, str(exc.detail), _http_hint(exc.status_code))
    response.headers.update(exc.headers or {})
    if exc.status_code == 405:  # Starlette names only the first route's method; list every one
        response.headers["Allow"] = ", ".join(_allowed_methods(request))
    return response


def _allowed_methods(request: Request) -> list[str]:
    methods: set[str] = set()
    for route in request.app.router.routes:
        match, _ = route.matches({**request.scope, "method": "GET"})
        if match != Match.NONE and getattr(route, "methods", None):
            methods |= set(route.methods)
    return sorted(methods)


def _http_hint(status: int) -> str:
    if status == 404:
        return "no such endpoint: see GET /openapi.json for the API (/, /chat-history, /chat-history/{conversationKey})"
    if status == 405:
        return "this endpoint does not accept that method: see GET /openapi.json"
    return "see GET /openapi.json for the API"


_HANDLERS: dict[type[Exception], Any] = {
    Refused: _refused,
    VersionMismatch: _precondition_failed,
    IdempotencyKeyReused: _idempotency_key_reused,
    RequestValidationError: _invalid_parameter,
    StoreError: _store_unavailable,
    HTTPException: _http_error,
}
