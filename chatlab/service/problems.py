"""Every error the service answers is an RFC 9457 problem JSON with a ``detail`` that says what to do: whatever
refuses a request raises, and the handlers here turn each into the same shape, so a client reads errors one way."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.routing import Match

from ..stores import StoreError
from ..stores.base import IdempotencyKeyReused, VersionMismatch
from ..stores.metadata import MetadataError, TooManyTags
from ..vocabulary import Refused
from .responses import json_response
from .security.conditions import etag

PROBLEM_JSON = "application/problem+json"
#: The RFC 9110 names where Python's ``HTTPStatus`` still has the older ones.
_TITLES = {413: "Content Too Large", 414: "URI Too Long", 422: "Unprocessable Content"}


def problem_response(status: int, detail: str, errors: list[dict[str, Any]] | None = None, title: str = "") -> Response:
    """The problem JSON of a refusal; ``errors`` has one entry per invalid field of a body, when it helps."""
    title = title or _TITLES.get(status) or HTTPStatus(status).phrase
    body: dict[str, Any] = {"title": title, "status": status, "detail": detail}
    if errors:
        body["errors"] = errors
    response = json_response(body)
    response.status_code = status
    response.headers["content-type"] = PROBLEM_JSON
    return response


async def _refused(_: Request, exc: Refused) -> Response:
    response = problem_response(exc.status, exc.detail, exc.errors)
    response.headers.update(exc.headers)
    return response


async def _precondition_failed(request: Request, exc: VersionMismatch) -> Response:
    """412 with the current ``ETag``, so the client knows the version it has to redo its change on."""
    detail = (
        "the conversation changed since the If-Match version (it is now at the ETag of this answer): "
        "GET it again, redo your change and retry; nothing was written"
    )
    return await _refused(request, Refused(412, detail, headers={"ETag": etag(exc.current)}))


async def _idempotency_key_reused(request: Request, exc: IdempotencyKeyReused) -> Response:
    detail = (  # a fork's reuse is answered by the fork (chatlab/service/forks.py): this is an append's
        "this Idempotency-Key was already used for an append of other messages to this conversation: "
        "use a new key for each new append; nothing was written"
    )
    return problem_response(422, detail)


async def _too_many_tags(request: Request, exc: TooManyTags) -> Response:
    """422 wherever a write would leave a conversation with more tags than it may carry."""
    return problem_response(422, f"{exc}: remove some with null; nothing was written")


async def _invalid_metadata(request: Request, exc: MetadataError) -> Response:
    """400 for a title or tag the metadata rule refuses, whichever write carried it."""
    return problem_response(400, f"{exc}; nothing was written")


async def _invalid_parameter(request: Request, exc: RequestValidationError) -> Response:
    """400, not FastAPI's 422: an invalid parameter is a bad request, as everywhere else in the service."""
    detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
    return problem_response(400, detail)


async def _store_unavailable(request: Request, exc: StoreError) -> Response:
    retry = {"Retry-After": "1"}  # seconds
    return await _refused(request, Refused(503, f"the history store failed: {exc}; retry later", headers=retry))


async def _http_error(request: Request, exc: HTTPException) -> Response:
    """Starlette's 404 and 405, with a hint where the API is described."""
    hints = {
        404: "no such endpoint: see GET /openapi.json for the API (/, /chat-history, /chat-history/{conversationKey})",
        405: "this endpoint does not accept that method: see GET /openapi.json",
    }
    hint = hints.get(exc.status_code, "see GET /openapi.json for the API")
    response = problem_response(exc.status_code, hint, title=str(exc.detail))
    response.headers.update(exc.headers or {})
    if exc.status_code == 405:  # Starlette names only the first route's method; list every one
        methods: set[str] = set()
        for route in request.app.router.routes:
            match, _ = route.matches({**request.scope, "method": "GET"})
            if match != Match.NONE and getattr(route, "methods", None):
                methods |= set(route.methods)
        response.headers["Allow"] = ", ".join(sorted(methods))
    return response


#: Every error as problem JSON, FastAPI's and Starlette's own included (the app's ``exception_handlers``).
ERROR_HANDLERS: dict[Any, Any] = {
    Refused: _refused,
    VersionMismatch: _precondition_failed,
    IdempotencyKeyReused: _idempotency_key_reused,
    TooManyTags: _too_many_tags,
    MetadataError: _invalid_metadata,
    RequestValidationError: _invalid_parameter,
    StoreError: _store_unavailable,
    HTTPException: _http_error,
}
