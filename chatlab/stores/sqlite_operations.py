"""What the SQLite store does beyond reads and writes: the timestamps' upgrade, migration's restore, retention.

Mixed into :class:`~chatlab.stores.sqlite.SqliteChatHistoryStore` (schema version 3: ``created_at`` and
``updated_at`` on ``chatlab_conversations``, ``updated_at`` indexed).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Sequence
from typing import Any

from ._group_commit import GroupCommitter
from .base import ConversationRecord


class SqliteOperations:
    """Uses the store's transactions (``_call``; writes through its group committer, ``_writer``) and its check of
    a conversation's version."""

    cutoff: Callable[[], float | None]
    _call: Callable[[Callable[[sqlite3.Connection], Any]], Any]
    _writer: GroupCommitter
    _current: Callable[[sqlite3.Connection, str, Collection[str] | None], tuple[str, int]]

    @staticmethod
    def _upgrade_from_2(conn: sqlite3.Connection, now: float) -> None:
        """Version 2 had no timestamps: each conversation gets the upgrade's time as both."""
        columns = {row[1] for row in conn.execute("PRAGMA table_info(chatlab_conversations)")}
        for column in ("created_at", "updated_at"):
            if column not in columns:
                conn.execute(f"ALTER TABLE chatlab_conversations ADD COLUMN {column} REAL")
        conn.execute(
            "UPDATE chatlab_conversations SET created_at = coalesce(created_at, ?),"
            " updated_at = coalesce(updated_at, ?)",
            (now, now),
        )
        conn.execute("UPDATE chatlab_meta SET value = '3' WHERE key = 'schema_version'")  # version 3: timestamps

    async def restore(self, records: Sequence[ConversationRecord]) -> None:
        def body(conn: sqlite3.Connection) -> None:
            for record in records:
                key = record.conversation_key
                self._current(conn, key, [record.expected])
                conn.execute("DELETE FROM chatlab_messages WHERE conversation_key = ?", (key,))
                conn.execute(
                    "INSERT OR REPLACE INTO chatlab_conversations (conversation_key, message_count, version, "
                    "created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                    (key, len(record.messages), record.version, record.created_at, record.updated_at),
                )
                conn.executemany(
                    "INSERT INTO chatlab_messages (conversation_key, position, body) VALUES (?, ?, ?)",
                    [(key, i, bytes(m)) for i, m in enumerate(record.messages)],
                )

        await self._writer.submit(body)

    async def sweep(self) -> int:
        """One write transaction deletes every conversation due (found by the ``updated_at`` index)."""
        cutoff = self.cutoff()
        if cutoff is None:
            return 0

        def body(conn: sqlite3.Connection) -> int:
            due = "SELECT conversation_key FROM chatlab_conversations WHERE updated_at <= ?"
            conn.execute(f"DELETE FROM chatlab_messages WHERE conversation_key IN ({due})", (cutoff,))
            return conn.execute("DELETE FROM chatlab_conversations WHERE updated_at <= ?", (cutoff,)).rowcount

        deleted: int = await self._writer.submit(body)
        return deleted
