"""Chat history in PostgreSQL, shared by any number of service processes.

Uses psycopg 3 with its async connection pool (``pip install 'chatlab[postgres]'``).

Guarantees:

* Each write is one transaction, committed before the call returns: a crash of the
  service process afterwards loses nothing (PostgreSQL's own durability then applies:
  ``fsync`` and ``synchronous_commit`` on, as by default).
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
  are one atomic step across processes, also for a conversation that does not exist yet.
  A read of messages and version is one statement, one snapshot. A version 1 schema is
  upgraded in place on first use (each conversation gets a version).
* Timestamps (schema version 3): ``created_at`` and ``updated_at`` (seconds since the epoch, the
  store's :attr:`clock`) on each conversation, written by the same transaction as the messages;
  ``updated_at`` is indexed for the retention :meth:`sweep`. Versions 1 and 2 are upgraded in place
  (their conversations get the upgrade's time).
* Every operation ends within ``timeout`` seconds, the wait for a connection included, even when
  the server or the network stops answering: at the deadline the connection's socket is shut
  down, so the driver fails at once (psycopg's own cancellation would wait for the frozen server),
  and the pool discards the broken connection and opens new ones as the server comes back.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ._loops import PerLoop
from ._urls import split_url
from .base import (
    ABSENT,
    ChatHistoryStore,
    Conversation,
    ConversationSlice,
    ConversationSummary,
    EncodedMessage,
    Idempotency,
    IdempotencyKeyReused,
    StoreError,
    VersionMismatch,
    WriteResult,
    appended_version,
    check_slice,
    new_version,
    prefix_upper_bound,
    version_matches,
)
from .postgres_operations import PostgresOperations

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

log = logging.getLogger(__name__)

SCHEMA_VERSION = 3

#: Query parameters of a store URL that chatlab reads itself (libpq would refuse them).
CHATLAB_PARAMETERS = ("schema",)


def _redacted(url: str) -> str:
    """host:port/database of a URL, without user or password, for messages and ``GET /``."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = parts.port or 5432
    database = parts.path.lstrip("/") or "(default database)"
    return f"{host}:{port}/{database}"


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
        self.where = _redacted(conninfo)
        self.description = (
            f"Chat history is stored in PostgreSQL at {self.where} (schema {self.schema}) and exposed over HTTP."
        )
        self._pools: PerLoop[AsyncConnectionPool] = PerLoop(self._open_pool, self._close_pool)
        self._schema_ready = False
        self._queries = self._build_queries()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.where} schema={self.schema}>"

    # -- SQL --------------------------------------------------------------------------

    def _build_queries(self) -> dict[str, Any]:
        from psycopg import sql

        names = {
            "schema": sql.Identifier(self.schema),
            "meta": sql.Identifier(self.schema, "chatlab_meta"),
            "conversations": sql.Identifier(self.schema, "chatlab_conversations"),
            "messages": sql.Identifier(self.schema, "chatlab_messages"),
            "idempotency": sql.Identifier(self.schema, "chatlab_idempotency"),
            "idempotency_expiry": sql.Identifier("chatlab_idempotency_expiry"),
            "updated_index": sql.Identifier("chatlab_conversations_updated"),
        }
        timestamps = [  # schema version 3
            "ALTER TABLE {conversations} ADD COLUMN IF NOT EXISTS created_at double precision",
            "ALTER TABLE {conversations} ADD COLUMN IF NOT EXISTS updated_at double precision",
            "UPDATE {conversations} SET created_at = coalesce(created_at, %(now)s),"
            " updated_at = coalesce(updated_at, %(now)s) WHERE created_at IS NULL OR updated_at IS NULL",
            "CREATE INDEX IF NOT EXISTS {updated_index} ON {conversations} (updated_at)",
        ]
        idempotency_tables = [
            "CREATE TABLE IF NOT EXISTS {idempotency} ("
            " conversation_key text NOT NULL, idempotency_key text NOT NULL, fingerprint text NOT NULL,"
            " version text NOT NULL, expires_at double precision NOT NULL,"
            " PRIMARY KEY (conversation_key, idempotency_key))",
            "CREATE INDEX IF NOT EXISTS {idempotency_expiry} ON {idempotency} (expires_at)",
        ]
        q: dict[str, str | list[str]] = {
            "create_schema": "CREATE SCHEMA IF NOT EXISTS {schema}",
            "create": [
                "CREATE TABLE IF NOT EXISTS {meta} (key text PRIMARY KEY, value text NOT NULL)",
                "CREATE TABLE IF NOT EXISTS {conversations} ("
                " conversation_key text PRIMARY KEY, message_count bigint NOT NULL, version text,"
                " created_at double precision, updated_at double precision)",
                "CREATE TABLE IF NOT EXISTS {messages} ("
                " conversation_key text NOT NULL, position bigint NOT NULL, body bytea NOT NULL,"
                " PRIMARY KEY (conversation_key, position))",
                *idempotency_tables,
                *timestamps,
            ],
            "upgrade_from_2": [*timestamps, "UPDATE {meta} SET value = '3' WHERE key = 'schema_version'"],
            "upgrade_from_1": [
                "ALTER TABLE {conversations} ADD COLUMN IF NOT EXISTS version text",
                "UPDATE {conversations} SET version = substr(md5(random()::text || clock_timestamp()::text"
                " || conversation_key), 1, 16) || '.' || message_count WHERE version IS NULL",
                *idempotency_tables,
                *timestamps,
                "UPDATE {meta} SET value = '3' WHERE key = 'schema_version'",
            ],
            "version_get": "SELECT value FROM {meta} WHERE key = 'schema_version'",
            "version_set": "INSERT INTO {meta} (key, value) VALUES ('schema_version', %s) ON CONFLICT DO NOTHING",
            "get": "SELECT body FROM {messages} WHERE conversation_key = %s ORDER BY position",
            # one statement: one snapshot of the version and the messages
            "read": "SELECT c.version, ARRAY(SELECT m.body FROM {messages} m"
            " WHERE m.conversation_key = c.conversation_key ORDER BY m.position)"
            " FROM {conversations} c WHERE c.conversation_key = %s",
            # a range of the primary key, with the count and version of the same snapshot (LIMIT NULL: all)
            "read_slice": "SELECT c.message_count, c.version, ARRAY(SELECT m.body FROM {messages} m"
            " WHERE m.conversation_key = c.conversation_key AND m.position >= %s ORDER BY m.position LIMIT %s)"
            " FROM {conversations} c WHERE c.conversation_key = %s",
            "lock": "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            "current": "SELECT version, message_count FROM {conversations} WHERE conversation_key = %s",
            # an append's reads in one statement (after the lock: a fresh snapshot), its writes in one or two more
            "append_current": "SELECT c.version, c.message_count, i.fingerprint, i.version FROM (SELECT) AS one"
            " LEFT JOIN {conversations} c ON c.conversation_key = %s"
            " LEFT JOIN {idempotency} i ON i.conversation_key = %s AND i.idempotency_key = %s AND i.expires_at > %s",
            "append_write": "WITH c AS (INSERT INTO {conversations} AS c (conversation_key, message_count, version,"
            " created_at, updated_at) VALUES (%s, %s, %s, %s, %s) ON CONFLICT (conversation_key) DO UPDATE SET"
            " message_count = c.message_count + excluded.message_count, version = excluded.version,"
            " updated_at = excluded.updated_at RETURNING message_count)"
            " INSERT INTO {messages} (conversation_key, position, body)"
            " SELECT %s, c.message_count - %s + t.ord - 1, t.body FROM c,"
            " unnest(%s::bytea[]) WITH ORDINALITY AS t(body, ord)",
            # the purge leaves the record being written alone: one statement must not touch a row twice
            "idempotency_write": "WITH purged AS (DELETE FROM {idempotency} WHERE expires_at <= %s"
            " AND NOT (conversation_key = %s AND idempotency_key = %s))"
            " INSERT INTO {idempotency}"
            " (conversation_key, idempotency_key, fingerprint, version, expires_at) VALUES (%s, %s, %s, %s, %s)"
            " ON CONFLICT (conversation_key, idempotency_key) DO UPDATE SET fingerprint = excluded.fingerprint,"
            " version = excluded.version, expires_at = excluded.expires_at",
            "replace_count": "INSERT INTO {conversations} AS c (conversation_key, message_count, version,"
            " created_at, updated_at) VALUES (%s, %s, %s, %s, %s) ON CONFLICT (conversation_key) DO UPDATE SET"
            " message_count = excluded.message_count, version = excluded.version, updated_at = excluded.updated_at",
            "restore_count": "INSERT INTO {conversations} AS c (conversation_key, message_count, version,"
            " created_at, updated_at) VALUES (%s, %s, %s, %s, %s) ON CONFLICT (conversation_key) DO UPDATE SET"
            " message_count = excluded.message_count, version = excluded.version,"
            " created_at = excluded.created_at, updated_at = excluded.updated_at",
            "due": "SELECT conversation_key FROM {conversations} WHERE updated_at <= %s"
            " ORDER BY conversation_key LIMIT 1000",
            "lock_many": "SELECT pg_advisory_xact_lock(hashtextextended(k, 0)) FROM unnest(%s::text[]) AS k",
            "sweep": "DELETE FROM {conversations} WHERE conversation_key = ANY(%s) AND updated_at <= %s"
            " RETURNING conversation_key",
            "delete_messages_many": "DELETE FROM {messages} WHERE conversation_key = ANY(%s)",
            "insert_messages": "INSERT INTO {messages} (conversation_key, position, body)"
            " SELECT %s, %s + t.ord - 1, t.body FROM unnest(%s::bytea[]) WITH ORDINALITY AS t(body, ord)",
            "delete_messages": "DELETE FROM {messages} WHERE conversation_key = %s",
            "delete_conversation": "DELETE FROM {conversations} WHERE conversation_key = %s",
            # "C" collation: byte order of UTF-8, which is code point order, as the other stores sort.
            "summaries": "SELECT conversation_key, message_count, version, created_at, updated_at"
            " FROM {conversations}"
            ' ORDER BY conversation_key COLLATE "C"',
            "summaries_from": "SELECT conversation_key, message_count, version, created_at, updated_at"
            " FROM {conversations}"
            ' WHERE conversation_key COLLATE "C" >= %s ORDER BY conversation_key COLLATE "C"',
            "summaries_range": "SELECT conversation_key, message_count, version, created_at, updated_at"
            " FROM {conversations}"
            ' WHERE conversation_key COLLATE "C" >= %s AND conversation_key COLLATE "C" < %s'
            ' ORDER BY conversation_key COLLATE "C"',
        }
        built: dict[str, Any] = {}
        for name, text in q.items():
            if isinstance(text, list):
                built[name] = [sql.SQL(t).format(**names) for t in text]
            else:
                built[name] = sql.SQL(text).format(**names)
        return built

    # -- connections ------------------------------------------------------------------

    async def _configure(self, conn: Any) -> None:
        if self.statement_timeout is not None:
            await conn.execute(
                "SELECT set_config('statement_timeout', %s, false)", (f"{int(self.statement_timeout * 1000)}",)
            )

    async def _open_pool(self) -> AsyncConnectionPool:
        from psycopg.conninfo import conninfo_to_dict
        from psycopg_pool import AsyncConnectionPool

        kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in conninfo_to_dict(self.conninfo):
            kwargs["connect_timeout"] = max(2, int(self.timeout))
        pool = AsyncConnectionPool(
            self.conninfo,
            kwargs=kwargs,
            min_size=self.min_size,
            max_size=self.max_size,
            timeout=self.timeout,
            configure=self._configure,
            name=f"chatlab-{self.where}",
            open=False,
        )
        await pool.open(wait=False)
        return pool

    @staticmethod
    async def _close_pool(pool: AsyncConnectionPool) -> None:
        await pool.close()

    async def _ensure_schema(self, conn: Any) -> None:
        if self._schema_ready:
            return
        q = self._queries
        async with conn.transaction():
            # DDL only when the tables are missing: a role with no CREATE right can use a
            # schema that someone else created.
            cur = await conn.execute(
                "SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = %s AND tablename = 'chatlab_meta'",
                (self.schema,),
            )
            if await cur.fetchone() is None:
                # Serialize creation among processes starting together (CREATE ... IF NOT
                # EXISTS alone can still collide on the catalog's unique indexes).
                await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"chatlab-schema:{self.schema}",))
                cur = await conn.execute("SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = %s", (self.schema,))
                if await cur.fetchone() is None:
                    await conn.execute(q["create_schema"])
                for statement in q["create"]:
                    await conn.execute(statement, {"now": self.clock()})
                await conn.execute(q["version_set"], (str(SCHEMA_VERSION),))
            row = await (await conn.execute(q["version_get"])).fetchone()
            if row is not None and int(row[0]) in (1, 2):
                await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"chatlab-schema:{self.schema}",))
                row = await (await conn.execute(q["version_get"])).fetchone()
                if row is not None and int(row[0]) in (1, 2):  # not upgraded by another process meanwhile
                    for statement in q[f"upgrade_from_{int(row[0])}"]:
                        await conn.execute(statement, {"now": self.clock()})
                    row = await (await conn.execute(q["version_get"])).fetchone()
        if row is None or int(row[0]) != SCHEMA_VERSION:
            raise StoreError(
                f"PostgreSQL store {self.where} schema {self.schema} has schema version {row and row[0]}; "
                f"this chatlab reads version {SCHEMA_VERSION} (and upgrades versions 1 and 2) only"
            )
        self._schema_ready = True

    def _connection(self) -> _Connection:
        return _Connection(self)

    # -- the store interface ----------------------------------------------------------

    async def get(self, conversation_key: str) -> list[EncodedMessage]:
        async with self._connection() as conn:
            cur = await conn.execute(self._queries["get"], (conversation_key,), binary=True)
            return [bytes(row[0]) for row in await cur.fetchall()]

    async def read(self, conversation_key: str) -> Conversation:
        async with self._connection() as conn:
            cur = await conn.execute(self._queries["read"], (conversation_key,), binary=True)
            row = await cur.fetchone()
        if row is None:
            return Conversation([], ABSENT)
        return Conversation([bytes(m) for m in row[1]], row[0])

    async def read_slice(self, conversation_key: str, after: int = 0, limit: int | None = None) -> ConversationSlice:
        check_slice(after, limit)
        async with self._connection() as conn:
            cur = await conn.execute(self._queries["read_slice"], (after, limit, conversation_key), binary=True)
            row = await cur.fetchone()
        if row is None:
            return ConversationSlice([], after, 0, ABSENT)
        return ConversationSlice([bytes(m) for m in row[2]], after, row[0], row[1])

    async def _locked_version(self, conn: Any, conversation_key: str) -> tuple[str, int]:
        """Take the conversation's write lock (until commit) and return its version and message count."""
        await conn.execute(self._queries["lock"], (f"chatlab:{self.schema}:{conversation_key}",))
        row = await (await conn.execute(self._queries["current"], (conversation_key,))).fetchone()
        return (row[0], row[1]) if row is not None else (ABSENT, 0)

    async def _lock_and_check(self, conn: Any, conversation_key: str, if_match: Collection[str] | None) -> None:
        """Take the conversation's write lock, then check ``if_match``: a replace or delete that checks
        and writes under one lock never undoes what another process wrote after the check."""
        current, _ = await self._locked_version(conn, conversation_key)
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
        q = self._queries
        # pipelined: BEGIN, the lock and the reads go in one round trip, the writes and COMMIT in another; the
        # server still runs them in order, so the reads see the conversation as the lock holder left it
        async with self._connection() as conn, conn.pipeline(), conn.transaction():
            await conn.execute(q["lock"], (f"chatlab:{self.schema}:{conversation_key}",))
            now = time.time()
            idem_key = idempotency.key if idempotency is not None else None
            cur = await conn.execute(q["append_current"], (conversation_key, conversation_key, idem_key, now))
            version, count, fingerprint, recorded = await cur.fetchone()
            version, count = (version, count) if version is not None else (ABSENT, 0)
            if idempotency is not None and fingerprint is not None:
                if fingerprint != idempotency.fingerprint:
                    raise IdempotencyKeyReused(idempotency.key)
                return WriteResult(recorded, replayed=True)
            if not version_matches(version, if_match):
                raise VersionMismatch(version)
            if batch:
                version = appended_version(version, count + len(batch))
                written = self.clock()
                args = (conversation_key, len(batch), version, written, written, conversation_key, len(batch), batch)
                await conn.execute(q["append_write"], args)
            if idempotency is not None:
                key, fp, expires = idempotency.key, idempotency.fingerprint, now + idempotency.ttl
                args2 = (now, conversation_key, key, conversation_key, key, fp, version, expires)
                await conn.execute(q["idempotency_write"], args2)
            return WriteResult(version)

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
        await self._pools.close()


class _Connection:
    """``async with``: a pooled connection with the schema in place; driver errors become StoreError."""

    def __init__(self, store: PostgresChatHistoryStore) -> None:
        self._store = store
        self._cm: Any = None
        self._conn: Any = None
        self._deadline: asyncio.TimerHandle | None = None
        self.expired = False

    def _expire(self) -> None:
        """The operation ran out of time: break its connection, so whatever waits on it fails now."""
        self.expired = True
        if self._conn is not None:
            _shut_down(self._conn)

    async def __aenter__(self) -> Any:
        store = self._store
        self._deadline = asyncio.get_running_loop().call_later(store.timeout, self._expire)
        try:
            pool = await store._pools.get()
            self._cm = pool.connection()
            conn = self._conn = await self._cm.__aenter__()
            if self.expired:  # the deadline passed while the pool handed it over
                _shut_down(conn)
        except Exception as exc:
            self._deadline.cancel()
            raise _store_error(store, exc, self.expired) from exc
        try:
            await store._ensure_schema(conn)
        except BaseException as exc:
            await self.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return conn

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        assert self._deadline is not None
        self._deadline.cancel()
        try:
            await self._cm.__aexit__(exc_type, exc, tb)  # the pool discards a connection that is broken
        except Exception as exit_exc:
            if exc is None:
                raise _store_error(self._store, exit_exc, self.expired) from exit_exc
        if exc is not None and isinstance(exc, Exception) and not isinstance(exc, _ANSWERS):
            raise _store_error(self._store, exc, self.expired) from exc


def _shut_down(conn: Any) -> None:
    """Shut the connection's socket down (a duplicate of it: psycopg still owns the original)."""
    try:
        with socket.socket(fileno=os.dup(conn.pgconn.socket)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except Exception as exc:  # already closed: nothing left to break
        log.debug("shutting down a PostgreSQL connection failed: %r", exc)


#: Exceptions that are the store's answer (nothing written), not a failure of the database.
_ANSWERS = (StoreError, VersionMismatch, IdempotencyKeyReused)


def _store_error(store: PostgresChatHistoryStore, exc: BaseException, expired: bool = False) -> StoreError:
    import psycopg
    from psycopg_pool import PoolTimeout

    if isinstance(exc, PoolTimeout):
        message = f"PostgreSQL at {store.where} is unreachable: no connection within {store.timeout:g} s"
    elif expired:
        message = f"PostgreSQL at {store.where} did not answer within {store.timeout:g} s (the store timeout)"
    elif isinstance(exc, psycopg.errors.QueryCanceled):
        message = f"PostgreSQL at {store.where} timed out: {exc}".strip()
    elif isinstance(exc, (psycopg.Error, OSError, asyncio.TimeoutError)):
        message = f"PostgreSQL at {store.where} failed: {exc}".strip()
    else:
        message = f"PostgreSQL store {store.where} failed: {exc!r}"
    log.warning("%s", message)
    return StoreError(message)
