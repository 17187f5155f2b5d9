"""The service's route class: an endpoint that takes only the ``Request`` is its own handler, with no dependencies
solved and nothing serialized (https://fastapi.tiangolo.com/how-to/custom-request-and-route/)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from typing import Any, cast

from fastapi import Request, Response
from fastapi.routing import APIRoute

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class RequestRoute(APIRoute):
    def get_route_handler(self) -> Handler:
        if takes_only_the_request(self):
            return cast(Handler, self.endpoint)
        return super().get_route_handler()


def takes_only_the_request(route: APIRoute) -> bool:
    """Whether FastAPI has nothing to solve for the route's endpoint: an ``async def f(request: Request)``."""
    wants = route.dependant
    solved = (wants.path_params, wants.query_params, wants.header_params, wants.cookie_params, wants.body_params)
    return (
        wants.request_param_name is not None
        and not any(solved)
        and not wants.dependencies
        and not route.dependencies
        and inspect.iscoroutinefunction(route.endpoint)
        and len(inspect.signature(route.endpoint).parameters) == 1
    )
