"""What the PostgreSQL store does beyond reads and writes: migration's restore and retention.

Mixed into :class:`~chatlab.stores.postgres.PostgresChatHistoryStore` (schema version 3: ``created_at`` and
``updated_at`` on ``chatlab_conversations``, ``updated_at`` indexed); its statements are in
:mod:`chatlab.stores.postgres_sql` with the others.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from .base import ConversationRecord


class PostgresOperations:
    """Uses the store's connections, queries and per-conversation write lock."""

    schema: str
    cutoff: Callable[[], float | None]
    _queries: dict[str, Any]
    _connection: Callable[[], Any]
    _check: Callable[[Any, str, Collection[str] | None], Any]

    async def restore(self, records: Sequence[ConversationRecord]) -> None:
        q = self._queries
        async with self._connection() as conn, conn.transaction():
            # every lock first, in the one order of all takers of several (appends' batches, the sweep): no deadlock;
            # then each record checked under its lock
            await conn.execute(q["lock_many"], ([f"chatlab:{self.schema}:{r.conversation_key}" for r in records],))
            for record in records:
                key = record.conversation_key
                await self._check(conn, key, [record.expected])
                count = (key, len(record.messages), record.version, record.created_at, record.updated_at)
                await conn.execute(q["restore_count"], count)
                await conn.execute(q["delete_messages"], (key,))
                if record.messages:
                    await conn.execute(q["insert_messages"], (key, 0, [bytes(m) for m in record.messages]))

    async def sweep(self) -> int:
        """Deletes what is due in transactions of up to 1000 conversations, each under its write lock."""
        cutoff = self.cutoff()
        if cutoff is None:
            return 0
        q, deleted = self._queries, 0
        while True:
            async with self._connection() as conn, conn.transaction():
                due = [row[0] for row in await (await conn.execute(q["due"], (cutoff,))).fetchall()]
                if not due:
                    return deleted
                await conn.execute(q["lock_many"], ([f"chatlab:{self.schema}:{k}" for k in due],))
                cur = await conn.execute(q["sweep"], (due, cutoff))  # not written since: still due
                gone = [row[0] for row in await cur.fetchall()]
                await conn.execute(q["delete_messages_many"], (gone,))
                deleted += len(gone)
