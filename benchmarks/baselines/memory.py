"""The in-memory baseline: a dict of lists, as the article's C# service keeps its history."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Response

from .body import Messages


def create_app(url: str) -> FastAPI:
    """The baseline on a ``dict`` of lists (``url`` is ``memory://``; nothing is kept elsewhere)."""
    app = FastAPI()
    history: dict[str, list[dict[str, Any]]] = {}

    @app.get("/")
    async def root() -> dict[str, str]:
        return {"service": "baseline (memory)"}

    @app.get("/chat-history/{key}")
    async def read(key: str) -> list[dict[str, Any]]:
        return history.get(key, [])

    @app.post("/chat-history/{key}", status_code=202)
    async def append(key: str, body: Messages, response: Response) -> None:
        history.setdefault(key, []).extend(body.messages)
        response.headers["Location"] = f"/chat-history/{key}"

    @app.put("/chat-history/{key}", status_code=204)
    async def replace(key: str, body: Messages) -> None:
        history[key] = list(body.messages)

    return app
