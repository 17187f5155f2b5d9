"""The framework's limits: a bare Starlette app, and a bare FastAPI app, on the service's paths, doing nothing else.

``GET /chat-history/{key}`` answers fixed bytes (the service's answer for the benchmark's
conversation); ``POST /chat-history/{key}`` reads the body and answers ``202`` with a
``Location``. On the same server stack as the service, it is the least any Starlette or FastAPI
service costs there, so service / ceiling is what the service itself (FastAPI, checking,
storing, reading) costs beyond the framework's routing.

The **FastAPI floor** is the same two endpoints in a FastAPI app made as the service makes its own (telemetry and
the docs pages off, chatlab's route class, so FastAPI solves nothing): floor / ceiling is what FastAPI's own
per-request layers leave of Starlette's rate, the most any service routed by FastAPI reaches on this stack.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import FastAPI
from fastapi.telemetry import TelemetryConfig
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

_ROOT = b'{"service":"ceiling"}'
Endpoint = Callable[[Request], Awaitable[Response]]


def ceiling_app(read_body: bytes) -> Starlette:
    """A bare Starlette app on the service's paths."""
    read, append = _endpoints(read_body)
    return Starlette(
        routes=[
            Route("/", _root),
            Route("/chat-history/{key}", read, methods=["GET"]),
            Route("/chat-history/{key}", append, methods=["POST"]),
        ]
    )


def floor_app(read_body: bytes) -> FastAPI:
    """A bare FastAPI app on the service's paths, with the service's framework options and route class."""
    from chatlab.service.request_route import RequestRoute

    telemetry_off: TelemetryConfig = {"tracing": False, "metrics": False, "logs": False}
    app = FastAPI(telemetry=telemetry_off, docs_url=None, redoc_url=None, redirect_slashes=False)
    app.router.route_class = RequestRoute
    read, append = _endpoints(read_body)
    app.get("/")(_root)
    app.get("/chat-history/{key}")(read)
    app.post("/chat-history/{key}")(append)
    return app


async def _root(request: Request) -> Response:
    return Response(_ROOT, media_type="application/json")


def _endpoints(read_body: bytes) -> tuple[Endpoint, Endpoint]:
    """The read (fixed bytes) and the append (the body read, ``202`` with a ``Location``)."""

    async def read(request: Request) -> Response:
        return Response(read_body, media_type="application/json")

    async def append(request: Request) -> Response:
        await request.body()
        return Response(status_code=202, headers={"Location": f"/chat-history/{request.path_params['key']}"})

    return read, append
