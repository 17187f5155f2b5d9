"""A shortcut to the conversation's routes, which serve nearly every request, past the layers between.

A request goes through FastAPI's and Starlette's entry, their two error-handling layers (each
wrapping ``send``), the service's guard, then the router, which matches each route's regular
expression in turn: about a quarter of the instructions of a read in the app. The service's own
layers are known, so for ``/chat-history/{conversationKey}`` the shortcut does what they would,
and nothing else: the same guard checks (a request they refuse takes the long way, to be refused
there), the route of its method found by a string test, and an error answered by the app's own
handler for it, as the error layers would. Any other middleware (CORS, which adds ``Vary: Origin``
to every answer; ``--metrics``; one added by the caller) turns the shortcut off: every request then
takes the whole path.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any

from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import Receive, Scope, Send

from .direct_routes import DirectRoute
from .guard import RequestGuard

CONVERSATION_PATH = "/chat-history/{conversationKey}"
_PREFIX = "/chat-history/"
Handler = Callable[[Request], Coroutine[Any, Any, Response]]
ErrorHandler = Callable[[Request, Any], Any]


class ConversationShortcut:
    """Serves a conversation's request as its route would be served after every layer of the app."""

    def __init__(self, routes: Iterable[BaseRoute], guard: RequestGuard, errors: Mapping[Any, ErrorHandler]) -> None:
        self.handlers = _conversation_handlers(routes)
        self.guard = guard
        self.errors = {kind: handler for kind, handler in errors.items() if isinstance(kind, type)}

    @classmethod
    def of(
        cls, routes: Iterable[BaseRoute], middleware: list[Middleware], errors: Mapping[Any, ErrorHandler]
    ) -> ConversationShortcut | None:
        """The shortcut past ``middleware`` (the app's own), or ``None`` if it is more than the guard (or an
        error handler is not a coroutine function: the error layers know how to call one)."""
        kinds: list[Any] = [layer.cls for layer in middleware]
        if kinds != [RequestGuard] or not all(inspect.iscoroutinefunction(h) for h in errors.values()):
            return None
        args: tuple[Any, ...] = tuple(middleware[0].args)
        return cls(routes, RequestGuard(_unused, *args, **middleware[0].kwargs), errors)

    def handler(self, scope: Scope) -> Handler | None:
        """The handler of this request's route, if the shortcut serves it: a conversation's, for a method its
        routes take, that the guard lets through, without a ``root_path`` to strip."""
        path: str = scope["path"]
        if not path.startswith(_PREFIX) or scope.get("root_path"):
            return None
        key = path[len(_PREFIX) :]
        handler = self.handlers.get(scope["method"])
        if handler is None or not key or "/" in key or self.guard.refusal(scope) is not None:
            return None
        scope["path_params"] = {"conversationKey": key}
        return handler

    async def serve(self, handler: Handler, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer with the route's response, or with the app's handler of what it raised; an error without
        one propagates, as from the app's layers (the server answers 500)."""
        request = Request(scope, receive, send)
        try:
            response = await handler(request)
        except Exception as exc:
            error_handler = next((self.errors[k] for k in type(exc).__mro__ if k in self.errors), None)
            if error_handler is None:
                raise
            response = await error_handler(request, exc)
        await response(scope, receive, send)


def _conversation_handlers(routes: Iterable[BaseRoute]) -> dict[str, Handler]:
    """The handler of each method of a conversation: the first route's for it, as the router finds it."""
    found: dict[str, Handler] = {}
    for route in routes:
        if isinstance(route, DirectRoute) and route.path == CONVERSATION_PATH and route.direct_handler is not None:
            for method in route.methods or ():
                found.setdefault(method, route.direct_handler)
    return found


async def _unused(scope: Scope, receive: Receive, send: Send) -> None:
    """The guard's inner app: the shortcut only asks it for refusals."""
    raise RuntimeError("the shortcut's guard serves no request")
