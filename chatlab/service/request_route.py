"""The service's route class: an endpoint written as ``async def endpoint(request: Request) -> Response`` is its own
request handler, with nothing for FastAPI to solve or serialize. ``get_route_handler`` is the hook FastAPI documents
for custom route classes (https://fastapi.tiangolo.com/how-to/custom-request-and-route/); whether an endpoint takes
only the request is read from its signature, never from FastAPI's internals."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Coroutine
from typing import Any, cast

from fastapi import Request, Response
from fastapi.routing import APIRoute

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class RequestRoute(APIRoute):
    """An :class:`APIRoute` whose request-only endpoints handle their requests themselves."""

    def get_route_handler(self) -> Handler:
        """The endpoint itself when it takes only the request and the route has no dependencies; else FastAPI's."""
        if not self.dependencies and takes_only_the_request(self.endpoint):
            return cast(Handler, self.endpoint)
        return super().get_route_handler()


def takes_only_the_request(endpoint: Callable[..., Any]) -> bool:
    """Whether ``endpoint`` is an ``async def f(request: Request)``."""
    if not inspect.iscoroutinefunction(endpoint):
        return False
    parameters = list(inspect.signature(endpoint).parameters)
    if len(parameters) != 1:
        return False
    return typing.get_type_hints(endpoint).get(parameters[0]) is Request
