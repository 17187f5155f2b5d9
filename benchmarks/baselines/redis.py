"""The Redis baseline: ``redis.asyncio`` (hiredis parses the replies when installed), a list per
conversation, one command per request; durable as the server is configured, as chatlab's Redis store.

``?prefix=NAME`` in the URL prefixes every key (the benchmark isolates its runs so).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis.asyncio as redis
from fastapi import FastAPI, Response

from .body import Messages


def split_prefix(url: str) -> tuple[str, str]:
    """The URL without its ``prefix`` parameter, and that parameter (``""`` if none)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    prefix = next((value for name, value in query if name == "prefix"), "")
    rest = [(name, value) for name, value in query if name != "prefix"]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(rest), parts.fragment)), prefix


def create_app(url: str) -> FastAPI:
    """The baseline on Redis at ``url`` (its ``prefix`` parameter: the keys' prefix), one list per conversation."""
    server, prefix = split_prefix(url)
    client = redis.Redis.from_url(server)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await client.aclose()

    app = FastAPI(lifespan=lifespan)

    @app.get("/")
    async def root() -> dict[str, str]:
        return {"service": "baseline (redis)"}

    @app.get("/chat-history/{key}")
    async def read(key: str) -> list[dict[str, Any]]:
        return [json.loads(m) for m in await client.lrange(prefix + key, 0, -1)]

    @app.post("/chat-history/{key}", status_code=202)
    async def append(key: str, body: Messages, response: Response) -> None:
        await client.rpush(prefix + key, *[json.dumps(m) for m in body.messages])
        response.headers["Location"] = f"/chat-history/{key}"

    @app.put("/chat-history/{key}", status_code=204)
    async def replace(key: str, body: Messages) -> None:
        async with client.pipeline(transaction=True) as pipe:
            pipe.delete(prefix + key)
            pipe.rpush(prefix + key, *[json.dumps(m) for m in body.messages])
            await pipe.execute()

    return app
