"""The benchmark's ceiling: a bare FastAPI app on the service's paths that does nothing.

It answers ``GET /chat-history/{conversationKey}`` with fixed bytes (the service's answer
for the benchmark's conversation) and ``POST /chat-history/{conversationKey}`` by reading the
body and answering ``202`` with a ``Location``, as the service does. What the service does
beyond this (checking, storing, reading the store) is what the benchmark's ratio measures.

Its routes are the service's own kind (:mod:`chatlab.service.direct_routes`): the endpoint gets
the key straight from the request, skipping FastAPI's per-request parameter solving as the
service's conversation endpoints do. A plain FastAPI endpoint would pay that solving, which the
service does not, and the ratio would flatter the service.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request, Response

from ..service.direct_routes import DirectRoute, direct


async def _key(request: Request) -> dict[str, Any]:
    return {"key": request.path_params["conversationKey"]}


async def _key_after_body(request: Request) -> dict[str, Any]:
    await request.body()
    return await _key(request)


def ceiling_app(read_body: bytes) -> FastAPI:
    app = FastAPI()
    app.router.route_class = DirectRoute

    @app.get("/")
    async def root() -> Response:
        return Response(b'{"service":"ceiling"}', media_type="application/json")

    @app.get("/chat-history/{conversationKey}")
    @direct(_key)
    async def read(key: str) -> Response:
        return Response(read_body, media_type="application/json")

    @app.post("/chat-history/{conversationKey}", status_code=202)
    @direct(_key_after_body)
    async def append(key: str) -> Response:
        return Response(status_code=202, headers={"Location": f"/chat-history/{key}"})

    return app
