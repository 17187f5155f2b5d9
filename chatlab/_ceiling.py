"""The benchmark's ceiling: a bare FastAPI app on the service's paths that does nothing.

It answers ``GET /chat-history/{conversationKey}`` with fixed bytes (the service's answer
for the benchmark's conversation) and ``POST /chat-history/{conversationKey}`` by reading the
body and answering ``202`` with a ``Location``, as the service does. What the service does
beyond this (checking, storing, reading the store) is what the benchmark's ratio measures.

(No ``from __future__ import annotations`` here: FastAPI must see ``Request`` as a class.)
"""

from fastapi import FastAPI, Request, Response


def ceiling_app(read_body: bytes) -> FastAPI:
    app = FastAPI()

    @app.get("/")
    async def root() -> Response:
        return Response(b'{"service":"ceiling"}', media_type="application/json")

    @app.get("/chat-history/{conversationKey}")
    async def read(conversationKey: str) -> Response:  # noqa: N803 - the service's parameter name
        return Response(read_body, media_type="application/json")

    @app.post("/chat-history/{conversationKey}", status_code=202)
    async def append(conversationKey: str, request: Request) -> Response:  # noqa: N803
        await request.body()
        return Response(status_code=202, headers={"Location": f"/chat-history/{conversationKey}"})

    return app
