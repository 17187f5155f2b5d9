"""New SQLite files keep messages and idempotency records in written order (rowid tables with unique indexes:
fewer pages written per group commit); files made before keep their tables, read and written by the same
statements."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from chatlab.stores import open_store
from chatlab.stores.base import Idempotency
from chatlab.stores.sqlite_schema import WRITTEN_ORDER

KEYS = ["a", "b", "c", "d"]


def _message(i: int) -> bytes:
    return b'{"role":"user","contents":[{"$type":"text","text":"m%d"}]}' % i


OLD_LAYOUT = [  # schema 3 as files were made before the written-order tables
    "CREATE TABLE chatlab_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE chatlab_conversations (conversation_key TEXT PRIMARY KEY, message_count INTEGER NOT NULL, "
    "version TEXT, created_at REAL, updated_at REAL)",
    "CREATE TABLE chatlab_messages (conversation_key TEXT NOT NULL, position INTEGER NOT NULL, body BLOB NOT NULL, "
    "PRIMARY KEY (conversation_key, position)) WITHOUT ROWID",
    "CREATE TABLE chatlab_idempotency (conversation_key TEXT NOT NULL, idempotency_key TEXT NOT NULL, fingerprint "
    "TEXT NOT NULL, version TEXT NOT NULL, expires_at REAL NOT NULL, PRIMARY KEY (conversation_key, idempotency_key)) "
    "WITHOUT ROWID",
    "CREATE INDEX chatlab_idempotency_expiry ON chatlab_idempotency (expires_at)",
    "INSERT INTO chatlab_meta VALUES ('schema_version', '3')",
]


def _layout(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT name, sql FROM sqlite_schema WHERE sql IS NOT NULL"))


def test_new_files_keep_rows_in_written_order_and_old_files_their_layout(tmp_path: Path) -> None:
    async def use(path: Path) -> None:
        store = open_store(f"sqlite:///{path}")
        try:
            for i in range(3):
                await asyncio.gather(
                    *(store.append(k, [_message(i)], idempotency=Idempotency(f"{i}", "f")) for k in KEYS)
                )
            assert (await store.append("a", [_message(0)], idempotency=Idempotency("0", "f"))).replayed
            await store.replace("b", [_message(9)])
            await store.delete("c")
            assert [await store.get(k) for k in KEYS] == [
                [_message(i) for i in range(3)],
                [_message(9)],
                [],
                [_message(i) for i in range(3)],
            ]
            assert (await store.read_slice("d", 1, 1)).messages == [_message(1)]
        finally:
            await store.close()

    new = tmp_path / "new.db"
    asyncio.run(use(new))
    layout = _layout(new)
    for table, statements in WRITTEN_ORDER.items():
        assert [layout[table], layout[statements[1].split()[3]]] == list(statements)
    old = tmp_path / "old.db"
    with sqlite3.connect(old) as conn:
        for statement in OLD_LAYOUT:
            conn.execute(statement)
    before = _layout(old)
    asyncio.run(use(old))
    after = _layout(old)
    assert after["chatlab_messages"] == before["chatlab_messages"] and "chatlab_messages_position" not in after
    assert after["chatlab_idempotency"] == before["chatlab_idempotency"] and "chatlab_idempotency_key" not in after


def test_connections_checkpoint_the_wal_every_wal_checkpoint_pages(tmp_path: Path) -> None:
    from chatlab.stores.sqlite import WAL_CHECKPOINT_PAGES, SqliteChatHistoryStore

    store = SqliteChatHistoryStore(tmp_path / "h.db")
    conn = store._connect()
    try:
        assert conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (WAL_CHECKPOINT_PAGES,)
        assert conn.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL, as before
    finally:
        conn.close()
