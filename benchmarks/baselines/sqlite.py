"""The SQLite baseline: ``sqlite3`` in FastAPI's thread pool, a connection per thread, WAL with
``synchronous=FULL`` as chatlab's SQLite store commits."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Response

from .body import Messages

SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY,
    conversation TEXT NOT NULL,
    message TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages (conversation, id);
"""


def create_app(url: str) -> FastAPI:
    """``url``: ``sqlite:///path`` or a file path."""
    path = Path(url.removeprefix("sqlite:///"))
    local = threading.local()

    def connection() -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(path, timeout=30)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            local.conn = conn
        return conn

    connection().executescript(SCHEMA)
    app = FastAPI()

    @app.get("/")
    def root() -> dict[str, str]:
        return {"service": "baseline (sqlite)"}

    @app.get("/chat-history/{key}")
    def read(key: str) -> list[dict[str, Any]]:
        rows = connection().execute("SELECT message FROM messages WHERE conversation = ? ORDER BY id", (key,))
        return [json.loads(message) for (message,) in rows]

    @app.post("/chat-history/{key}", status_code=202)
    def append(key: str, body: Messages, response: Response) -> None:
        with connection() as conn:
            conn.executemany(
                "INSERT INTO messages (conversation, message) VALUES (?, ?)",
                [(key, json.dumps(m)) for m in body.messages],
            )
        response.headers["Location"] = f"/chat-history/{key}"

    @app.put("/chat-history/{key}", status_code=204)
    def replace(key: str, body: Messages) -> None:
        with connection() as conn:
            conn.execute("DELETE FROM messages WHERE conversation = ?", (key,))
            conn.executemany(
                "INSERT INTO messages (conversation, message) VALUES (?, ?)",
                [(key, json.dumps(m)) for m in body.messages],
            )

    return app
