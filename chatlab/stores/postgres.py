"""Chat history in PostgreSQL, shared by any number of service processes.

Uses psycopg 3 with its async connection pool (``pip install 'chatlab[postgres]'``).

Guarantees:

* Each write is one transaction, committed before the call returns: a crash of the
  service process afterwards loses nothing (PostgreSQL's own durability then applies:
  ``fsync`` and ``synchronous_commit`` on, as by default). Concurrent appends of one process may
  share a transaction (group appends, below): still committed before any of them returns.
* An append first upserts the conversation's row (``INSERT ... ON CONFLICT DO UPDATE``
  adding the batch size to ``message_count``). That takes the row's lock until commit,
  so concurrent appends to one conversation, from any process, get disjoint contiguous
  ranges of positions, in commit order. Replace and delete lock the same row first, so
  the three never interleave.
* ``message_count`` changes in the same transaction as the messages: summaries are exact.
* Messages are ``bytea``: what was stored is what comes back, byte for byte.
* Versions and idempotency records (schema version 2): every write (a delete too) first takes a
  transaction-scoped advisory lock on its conversation key, then checks ``if_match`` and the
  idempotency record, writes, and records, all in one transaction; so a check and its write
  are one atomic step across processes, also for a conversation that does not exist yet. An append
  is one statement, one round trip: the call of a server-side function that takes the lock, then checks and
  writes (the function is created beside the tables where it is missing; the tables stay version 3).
  A read of messages and version is one statement, one snapshot. A version 1 schema is
  upgraded in place on first use (each conversation gets a version).
* Group reads and group appends (:mod:`chatlab.stores.postgres_batches`): the reads, and the appends, that
  wait at one moment in one process share one statement. A batch of reads is one snapshot, taken after each
  member's call began. A batch of appends is one transaction, the call of a second function created beside the
  first (:mod:`chatlab.stores.postgres_append_sql`): it takes the batch's locks, reads, decides each member by the
  single append's rules in arrival order (a refusal is that member's alone; members to one conversation see each
  other in the order they came), then writes everything at once (a role that may not create it appends one call at
  a time, as before); a failure fails every member and writes nothing.
  Whoever takes several conversations' locks in one transaction (a batch, the retention sweep, a restore) takes
  them in one order (``hashtextextended`` of the lock key), so they never deadlock.
* Timestamps (schema version 3): ``created_at`` and ``updated_at`` (seconds since the epoch, the
  store's :attr:`clock`) on each conversation, written by the same transaction as the messages;
  ``updated_at`` is indexed for the retention :meth:`sweep`. Versions 1 and 2 are upgraded in place
  (their conversations get the upgrade's time).
* Every operation ends within ``timeout`` seconds, the waits for its batch and a connection included, even when
  the server or the network stops answering: at the deadline the connection's socket is shut
  down, so the driver fails at once (psycopg's own cancellation would wait for the frozen server),
  and the pool discards the broken connection and opens new ones as the server comes back.

The SQL is in :mod:`chatlab.stores.postgres_sql`, the creation and in-place upgrade of the tables in
:mod:`chatlab.stores.postgres_schema`, the pools and deadlines in :mod:`chatlab.stores.postgres_connections`, the
batching in :mod:`chatlab.stores.postgres_batches`, the reads' and appends' statements sent on libpq in
:mod:`chatlab.stores.postgres_raw` (parameters packed by :mod:`chatlab.stores.postgres_binary`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from ._loops import PerLoop
from ._urls import split_url
from .base import (
    ABSENT,
    ChatHistoryStore,
    Conversation,
    ConversationArray,
    ConversationSlice,
    ConversationSummary,
    EncodedMessage,
    Idempotency,
    IdempotencyKeyReused,
    VersionMismatch,
    WriteResult,
    check_slice,
    new_generation,
    new_version,
    prefix_upper_bound,
    version_matches,
)
from .postgres_batches import Batches, batches_of
from .postgres_connections import Connection, close_pool, open_pool, redacted
from .postgres_operations import PostgresOperations
from .postgres_schema import SCHEMA_VERSION
from .postgres_sql import build_queries

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

EMPTY_ARRAY = ConversationArray(b"[]", 0, ABSENT)
"""What :meth:`PostgresChatHistoryStore.read_array` answers for a conversation that does not exist."""

#: Query parameters of a store URL that chatlab reads itself (libpq would refuse them).
CHATLAB_PARAMETERS = ("schema",)


class PostgresChatHistoryStore(PostgresOperations, ChatHistoryStore):
    """History in three tables of one PostgreSQL schema (created on first use).

    ``url`` is a libpq URL (``postgresql://user@host:5432/db``); the extra query parameter
    ``schema=NAME`` puts the tables in that schema (created if missing) instead of ``public``.
    ``timeout`` bounds each operation on the client side, the wait for a connection included;
    ``statement_timeout`` (seconds, ``None`` for the server's) bounds each statement on the
    server, lock waits included.
    """

    schema_version = SCHEMA_VERSION

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        timeout: float = 5.0,
        statement_timeout: float | None = 30.0,
        min_size: int = 1,
        max_size: int = 10,
    ) -> None:
        try:
            import psycopg  # noqa: F401
            import psycopg_pool  # noqa: F401
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError(
                "the PostgreSQL store needs psycopg 3 and its pool: pip install 'chatlab[postgres]'"
            ) from exc
        conninfo, ours = split_url(url, CHATLAB_PARAMETERS)
        self.conninfo = conninfo
        self.schema = schema or ours.get("schema") or "public"
        self.timeout = timeout
        self.statement_timeout = statement_timeout
        self.min_size = min_size
        self.max_size = max_size
        self.where = redacted(conninfo)
        self.description = (
            f"Chat history is stored in PostgreSQL at {self.where} (schema {self.schema}) and exposed over HTTP."
        )
        self._pools: PerLoop[AsyncConnectionPool] = PerLoop(lambda: open_pool(self), close_pool)
        self._schema_ready = False
        self._queries = build_queries(self.schema)
        self._batches: dict[asyncio.AbstractEventLoop, Batches] = {}
        self._append_batch = True  # False where the batch append's function is missing and may not be created

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.where} schema={self.schema}>"

    def _connection(self) -> Connection:
        """``async with``: a pooled connection with the schema in place, within the store's timeout."""
        return Connection(self)

    # -- the store interface ----------------------------------------------------------

    async def get(self, conversation_key: str) -> list[EncodedMessage]:
        row = await batches_of(self).reads.submit((conversation_key, 0, None))
        return [] if row is None else [bytes(m) for m in row[2]]

    async def read(self, conversation_key: str) -> Conversation:
        row = await batches_of(self).reads.submit((conversation_key, 0, None))
        if row is None:
            return Conversation([], ABSENT)
        return Conversation([bytes(m) for m in row[2]], row[1])

    async def read_array(self, conversation_key: str) -> ConversationArray:
        """:meth:`read`'s messages joined as they come (``bytes`` from the driver's ``bytea`` loader)."""
        row = await batches_of(self).reads.submit((conversation_key, 0, None))
        if row is None:
            return EMPTY_ARRAY
        messages = row[2]
        return ConversationArray(b"[" + b",".join(messages) + b"]", len(messages), row[1])

    async def read_slice(self, conversation_key: str, after: int = 0, limit: int | None = None) -> ConversationSlice:
        check_slice(after, limit)
        row = await batches_of(self).reads.submit((conversation_key, after, limit))
        if row is None:
            return ConversationSlice([], after, 0, ABSENT)
        return ConversationSlice([bytes(m) for m in row[2]], after, row[0], row[1])

    async def _lock_and_check(self, conn: Any, conversation_key: str, if_match: Collection[str] | None) -> None:
        """Take the conversation's write lock (until commit), then check ``if_match``: a replace or delete that
        checks and writes under one lock never undoes what another process wrote after the check."""
        await conn.execute(self._queries["lock"], (f"chatlab:{self.schema}:{conversation_key}",))
        await self._check(conn, conversation_key, if_match)

    async def _check(self, conn: Any, conversation_key: str, if_match: Collection[str] | None) -> None:
        """Check ``if_match`` against the stored version; the caller holds the conversation's write lock."""
        row = await (await conn.execute(self._queries["current"], (conversation_key,))).fetchone()
        current = row[0] if row is not None else ABSENT
        if not version_matches(current, if_match):
            raise VersionMismatch(current)

    async def append(
        self,
        conversation_key: str,
        messages: Sequence[EncodedMessage],
        *,
        if_match: Collection[str] | None = None,
        idempotency: Idempotency | None = None,
    ) -> WriteResult:
        batch = [bytes(m) for m in messages]
        if not batch and if_match is None and idempotency is None:
            return WriteResult((await self.read(conversation_key)).version)
        now = time.time()
        params = (
            f"chatlab:{self.schema}:{conversation_key}",  # the conversation's write lock, as replace and delete take it
            conversation_key,
            now,
            len(batch),
            batch,
            new_generation(),  # the version's if the conversation does not exist yet
            self.clock(),
            None if if_match is None else list(if_match),
            None if idempotency is None else idempotency.key,
            None if idempotency is None else idempotency.fingerprint,
            None if idempotency is None else now + idempotency.ttl,
        )
        # the append function's call (the lock, then the statement that checks and writes), alone or in a batch's
        # statement: one round trip and one implicit transaction, committed before the answer
        version, fingerprint, recorded, written = await batches_of(self).appends.submit(params)
        version = version if version is not None else ABSENT
        if idempotency is not None and fingerprint is not None:
            if fingerprint != idempotency.fingerprint:
                raise IdempotencyKeyReused(idempotency.key)
            return WriteResult(recorded, replayed=True)
        if not version_matches(version, if_match):
            raise VersionMismatch(version)
        return WriteResult(written)

    async def replace(
        self, conversation_key: str, messages: Sequence[EncodedMessage], *, if_match: Collection[str] | None = None
    ) -> WriteResult:
        batch = [bytes(m) for m in messages]
        q = self._queries
        async with self._connection() as conn, conn.transaction():
            await self._lock_and_check(conn, conversation_key, if_match)
            version = new_version(len(batch))
            now = self.clock()
            await conn.execute(q["replace_count"], (conversation_key, len(batch), version, now, now))
            await conn.execute(q["delete_messages"], (conversation_key,))
            if batch:
                await conn.execute(q["insert_messages"], (conversation_key, 0, batch))
            return WriteResult(version)

    async def delete(self, conversation_key: str, *, if_match: Collection[str] | None = None) -> None:
        q = self._queries
        async with self._connection() as conn, conn.transaction():
            await self._lock_and_check(conn, conversation_key, if_match)
            await conn.execute(q["delete_conversation"], (conversation_key,))
            await conn.execute(q["delete_messages"], (conversation_key,))

    async def summaries(self, prefix: str = "") -> list[ConversationSummary]:
        q = self._queries
        upper = prefix_upper_bound(prefix) if prefix else None
        async with self._connection() as conn:
            if not prefix:
                cur = await conn.execute(q["summaries"])
            elif upper is None:
                cur = await conn.execute(q["summaries_from"], (prefix,))
            else:
                cur = await conn.execute(q["summaries_range"], (prefix, upper))
            return [ConversationSummary(*row) for row in await cur.fetchall()]

    async def close(self) -> None:
        """Close the connection pools (a later call opens new ones)."""
        self._batches.clear()
        await self._pools.close()
