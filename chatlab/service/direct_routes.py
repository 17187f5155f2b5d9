"""The direct routes: endpoints that read their own arguments from the request, for speed.

FastAPI solves an endpoint's declared parameters and dependencies anew on every request,
which cost the service more than everything else it does on a read. The declarations stay
(they make the OpenAPI description, and a route falls back on them if its endpoint has no
reader); an endpoint marked with :func:`direct` is called with what its reader returns:
the same values, checked the same way, in the same order (caller, key, then the rest).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from fastapi import Depends, Request, Response
from fastapi.middleware.asyncexitstack import AsyncExitStackMiddleware
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from .callers import caller_dependency
from .parameters import conversation_key_dependency, read_position, refuse_unknown_query
from .settings import ServiceSettings

Reader = Callable[[Request], Awaitable[dict[str, Any]]]


class DirectRoute(APIRoute):
    """A route whose endpoint, if marked with :func:`direct`, gets its arguments straight from the request.

    Such a route is served as a plain ASGI app (:func:`_served`): FastAPI's wrapper around a handler adds
    two ``AsyncExitStack`` per request for dependencies with ``yield``, which a direct endpoint has none of.
    """

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, endpoint, **kwargs)
        #: the handler of a direct endpoint, which :mod:`.shortcut` may call itself
        self.direct_handler: Callable[[Request], Coroutine[Any, Any, Response]] | None = None
        if getattr(endpoint, "direct_arguments", None) is not None and kwargs.get("max_body_size") is None:
            self.direct_handler = self.get_route_handler()
            self.app = _served(self.direct_handler)
        else:  # FastAPI's handler closes uploaded files on the stack its middleware used to give every request
            self.app = AsyncExitStackMiddleware(self.app)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        declared = super().get_route_handler()
        reader = getattr(self.endpoint, "direct_arguments", None)
        if reader is None:
            return declared
        endpoint = self.endpoint

        async def handler(request: Request) -> Response:
            response: Response = await endpoint(**await reader(request))
            return response

        return handler


def _served(handler: Callable[[Request], Coroutine[Any, Any, Response]]) -> ASGIApp:
    """``handler`` as an ASGI app; what it raises goes to the app's ``ExceptionMiddleware``.

    Starlette's ``request_response`` would wrap every request in a second exception handling of its
    own, with a wrapper around each message sent: the same handlers, looked up the same way, so one
    layer gives the same answers.
    """

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        response = await handler(Request(scope, receive, send))
        await response(scope, receive, send)

    return app


def direct(reader: Reader) -> Callable[[Any], Any]:
    """Mark an endpoint to be called with ``await reader(request)`` (see :class:`DirectRoute`)."""

    def mark(endpoint: Any) -> Any:
        endpoint.direct_arguments = reader
        return endpoint

    return mark


class Arguments:
    """What the endpoints take, both ways: declared (``caller``, ``key``) and read directly (the readers).

    Use ``caller`` and ``key`` as parameter defaults, not in local ``Annotated`` aliases: the
    endpoints' annotations are strings, resolved in their module's scope.
    """

    def __init__(self, settings: ServiceSettings) -> None:
        caller = caller_dependency(settings)
        self._caller = caller.resolve
        key = conversation_key_dependency(settings)
        self._check_key = key.check
        self.caller = Depends(caller)
        self.key = Depends(key)

    async def caller_and_key(self, request: Request) -> dict[str, Any]:
        """Who calls, then which conversation, as FastAPI solves them: no valid API key is a 401 whatever the key."""
        caller = await self._caller(request)
        return {"caller": caller, "key": self._check_key(request.path_params["conversationKey"])}

    async def for_read(self, request: Request) -> dict[str, Any]:
        arguments = await self.caller_and_key(request)
        if not request.scope["query_string"]:  # the common read: no query to parse
            arguments["after"] = arguments["limit"] = None
            return arguments
        refuse_unknown_query(request, ("after", "limit"))
        arguments["after"] = read_position(request, "after", 0)
        arguments["limit"] = read_position(request, "limit", 1)
        return arguments

    async def for_append(self, request: Request) -> dict[str, Any]:
        arguments = await self.caller_and_key(request)
        arguments["request"] = request
        if_match, keys = _condition_headers(request.scope["headers"])
        arguments["if_match"] = if_match
        # several header lines are one list (RFC 9110 section 5.3), which is not the one String the header holds
        arguments["idempotency_key"] = ", ".join(keys) if keys else None  # an empty one is there, and malformed
        return arguments

    async def for_replace(self, request: Request) -> dict[str, Any]:
        arguments = await self.caller_and_key(request)
        arguments["request"] = request
        arguments["if_match"] = _condition_headers(request.scope["headers"])[0]
        return arguments

    async def for_delete(self, request: Request) -> dict[str, Any]:
        arguments = await self.caller_and_key(request)
        arguments["if_match"] = _condition_headers(request.scope["headers"])[0]
        return arguments


def _condition_headers(headers: list[tuple[bytes, bytes]]) -> tuple[str | None, list[str]]:
    """The first ``If-Match`` (as ``request.headers.get`` reads it) and every ``Idempotency-Key`` line, in one pass
    over the raw headers: a ``Headers`` object per request, asked for a header it lacks, was dearer than the pass."""
    if_match, keys = None, []
    for name, value in headers:
        if name == b"if-match":
            if if_match is None:
                if_match = value.decode("latin-1")
        elif name == b"idempotency-key":
            keys.append(value.decode("latin-1"))
    return if_match, keys
