"""The PostgreSQL baseline: psycopg 3 with its async connection pool, messages as ``jsonb``,
``synchronous_commit`` on (the server's default), as chatlab's PostgreSQL store commits.

``?schema=NAME`` in the URL puts the table in a schema of its own (the benchmark isolates its runs so).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from fastapi import FastAPI, Response
from psycopg import sql
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from .body import Messages

SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    conversation text NOT NULL,
    message jsonb NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages (conversation, id);
"""


def split_schema(url: str) -> tuple[str, str | None]:
    """The URL without its ``schema`` parameter, and that parameter."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((value for name, value in query if name == "schema"), None)
    rest = [(name, value) for name, value in query if name != "schema"]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(rest), parts.fragment)), schema


def create_app(url: str) -> FastAPI:
    """The baseline on PostgreSQL at ``url`` (its ``schema`` parameter: where the table lives), through psycopg's
    async pool."""
    conninfo, schema = split_schema(url)
    kwargs: dict[str, Any] = {"autocommit": True}
    if schema:
        kwargs["options"] = f"-c search_path={schema}"
    pool = AsyncConnectionPool(conninfo, kwargs=kwargs, min_size=4, max_size=16, open=False)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await pool.open(wait=True)
        async with pool.connection() as conn:
            if schema:
                await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
            await conn.execute(SCHEMA)
        yield
        await pool.close()

    app = FastAPI(lifespan=lifespan)

    @app.get("/")
    async def root() -> dict[str, str]:
        return {"service": "baseline (postgresql)"}

    @app.get("/chat-history/{key}")
    async def read(key: str) -> list[dict[str, Any]]:
        async with pool.connection() as conn:
            cursor = await conn.execute("SELECT message FROM messages WHERE conversation = %s ORDER BY id", (key,))
            return [message for (message,) in await cursor.fetchall()]

    @app.post("/chat-history/{key}", status_code=202)
    async def append(key: str, body: Messages, response: Response) -> None:
        async with pool.connection() as conn, conn.transaction(), conn.cursor() as cursor:
            await cursor.executemany(
                "INSERT INTO messages (conversation, message) VALUES (%s, %s)",
                [(key, Jsonb(m)) for m in body.messages],
            )
        response.headers["Location"] = f"/chat-history/{key}"

    @app.put("/chat-history/{key}", status_code=204)
    async def replace(key: str, body: Messages) -> None:
        async with pool.connection() as conn, conn.transaction(), conn.cursor() as cursor:
            await cursor.execute("DELETE FROM messages WHERE conversation = %s", (key,))
            await cursor.executemany(
                "INSERT INTO messages (conversation, message) VALUES (%s, %s)",
                [(key, Jsonb(m)) for m in body.messages],
            )

    return app
