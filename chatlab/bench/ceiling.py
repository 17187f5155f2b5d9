"""What the service is measured against: a bare Starlette app (the ceiling) and a raw ASGI app (the limit).

Both answer the service's paths as the service would and do nothing else:
``GET /chat-history/{conversationKey}`` with fixed bytes (the service's answer for the
benchmark's conversation), ``POST /chat-history/{conversationKey}`` by reading the body and
answering ``202`` with a ``Location``. They run on the same server stack as the service.

* the **ceiling** is a Starlette app with the service's routes: the least any Starlette or
  FastAPI service on this stack can cost, so service / ceiling is what the service itself
  (FastAPI, checking, storing, reading) costs beyond routing.
* the **limit** is a plain ASGI callable: what the server stack alone (uvicorn, its loop and
  HTTP parser) answers, so ceiling / limit is what the framework costs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

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


def limit_app(read_body: bytes) -> ASGIApp:
    """A raw ASGI app: any ``GET`` answers ``read_body``, any ``POST`` reads the body and answers ``202``."""
    read_head = [(b"content-type", b"application/json"), (b"content-length", str(len(read_body)).encode())]

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["method"] == "POST":
            while (await receive()).get("more_body"):
                pass
            location = scope["path"].encode()
            head = [(b"location", location), (b"content-length", b"0")]
            await send({"type": "http.response.start", "status": 202, "headers": head})
            await send({"type": "http.response.body", "body": b""})
            return
        await send({"type": "http.response.start", "status": 200, "headers": read_head})
        await send({"type": "http.response.body", "body": read_body})

    return app
