"""What the SQLite store does beyond reads and writes: migration's restore and retention.

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
