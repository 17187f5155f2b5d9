"""The framework's limit: a bare Starlette app on the service's paths, doing nothing else.

``GET /chat-history/{key}`` answers fixed bytes (the service's answer for the benchmark's
conversation); ``POST /chat-history/{key}`` reads the body and answers ``202`` with a
``Location``. On the same server stack as the service, it is the least any Starlette or FastAPI
service costs there, so service / ceiling is what the service itself (FastAPI, checking,
storing, reading) costs beyond the framework's routing.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

_ROOT = b'{"service":"ceiling"}'


def ceiling_app(read_body: bytes) -> Starlette:
    """A bare Starlette app on the service's paths."""

    async def root(request: Request) -> Response:
        return Response(_ROOT, media_type="application/json")

    async def read(request: Request) -> Response:
        return Response(read_body, media_type="application/json")

    async def append(request: Request) -> Response:
        await request.body()
        return Response(status_code=202, headers={"Location": f"/chat-history/{request.path_params['key']}"})

    return Starlette(
        routes=[
            Route("/", root),
            Route("/chat-history/{key}", read, methods=["GET"]),
            Route("/chat-history/{key}", append, methods=["POST"]),
        ]
    )
