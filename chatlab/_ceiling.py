"""The benchmark's ceiling: a bare FastAPI app on the service's paths that does nothing.

It answers ``GET /chat-history/{conversationKey}`` with fixed bytes (the service's answer
for the benchmark's conversation) and ``POST /chat-history/{conversationKey}`` by reading the
body and answering ``202`` with a ``Location``, as the service does. What the service does
beyond this (checking, storing, reading the store) is what the benchmark's ratio measures.

Its endpoints take only the ``Request`` and read the key from it, as the service's conversation
endpoints do (:mod:`chatlab.service.direct_routes`): a declared path parameter would cost the
ceiling FastAPI's parameter solving on every request, a cost the service does not pay, and the
ratio would then flatter the service.

(No ``from __future__ import annotations`` here: FastAPI must see ``Request`` as a class.)
"""

from fastapi import FastAPI, Request, Response


def ceiling_app(read_body: bytes) -> FastAPI:
    app = FastAPI()

    @app.get("/")
    async def root() -> Response:
        return Response(b'{"service":"ceiling"}', media_type="application/json")

    @app.get("/chat-history/{conversationKey}")
    async def read(request: Request) -> Response:
        request.path_params["conversationKey"]
        return Response(read_body, media_type="application/json")

    @app.post("/chat-history/{conversationKey}", status_code=202)
    async def append(request: Request) -> Response:
        await request.body()
        return Response(status_code=202, headers={"Location": f"/chat-history/{request.path_params['conversationKey']}"})

    return app
