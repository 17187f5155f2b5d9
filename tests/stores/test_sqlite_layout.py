"""New SQLite files keep messages and idempotency records in written order (rowid tables with unique indexes:
fewer pages written per group commit); files made before keep their tables, read and written by the same
statements."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from chatlab.stores import open_store
from chatlab.stores.base import Idempotency
from chatlab.stores.sqlite import SqliteChatHistoryStore
from chatlab.stores.sqlite.schema import WRITTEN_ORDER

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


def test_connections_use_the_store_s_settings(tmp_path: Path) -> None:
    default = SqliteChatHistoryStore(tmp_path / "h.db").connect()
    chosen = SqliteChatHistoryStore(tmp_path / "h.db", synchronous="normal", wal_autocheckpoint=500).connect()
    try:
        assert default.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert default.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
        assert default.execute("PRAGMA wal_autocheckpoint").fetchone() == (10_000,)
        assert chosen.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
        assert chosen.execute("PRAGMA wal_autocheckpoint").fetchone() == (500,)
    finally:
        default.close()
        chosen.close()


@pytest.mark.parametrize("options", [{"synchronous": "sometimes"}, {"wal_autocheckpoint": -1}])
def test_unknown_settings_are_refused_with_what_to_use(tmp_path: Path, options: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"use one of OFF, NORMAL, FULL, EXTRA|a number of pages"):
        SqliteChatHistoryStore(tmp_path / "h.db", **options)
