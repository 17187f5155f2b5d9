"""Chat history in a SQLite file: embedded, persistent, no server to run.

Uses the standard library's ``sqlite3`` in threads, so the event loop never waits on the disk:
reads in reader threads (:mod:`._readers`, each with a connection of its own), each read a whole
transaction; writes in one writer thread that commits the writes waiting at one moment together
(:mod:`._group_commit`: one fsync for many appends, each answered only once committed).

Guarantees:

* WAL journal with ``synchronous=FULL``: a transaction that returned is in the WAL file and
  fsync'ed, so it survives a kill -9 of the process and also a power cut. (``NORMAL`` would
  survive a process crash too, but may lose the last transactions on a power cut.)
* Writes start with ``BEGIN IMMEDIATE``: they take SQLite's write lock before reading the
  message count, so a batch gets contiguous positions even when several processes append
  to the same file. Writes of one process go through its writer thread: appends queued together
  as one batch (:mod:`.sqlite_append`: each checked before anything of it is written), other
  writes one savepoint each (a refused write rolls back alone); other processes are waited for
  up to ``busy_timeout``. A group of appends is first tried as one statement in autocommit
  (:mod:`.sqlite_one_step`: decided on the states the writer knows, each checked by the statement,
  which writes nothing if one changed, and the group then runs as above): same answers, same
  ``synchronous=FULL`` commit, without the GIL from its first write to its fsync.
* New files keep messages and idempotency records in written order (rowid tables with unique
  indexes, :mod:`.sqlite_schema`): a group commit writes fewer pages. Older files keep their tables.
* Every operation ends within ``busy_timeout`` seconds of its call, waits included (for a worker
  thread, for the writer thread, for another connection's or process's write lock): past it, an
  operation that has not started fails (503) and writes nothing.
* Readers don't block writers (WAL) and see whole transactions only; a read of messages and
  version is one transaction, so the two always agree.
* Versions and idempotency records (schema version 2) are read and written in the writing
  transaction itself, so a check and its write (or delete) are one atomic step. A version 1 file is
  upgraded in place on first use (each conversation gets a version).
* Timestamps (schema version 3): ``created_at`` and ``updated_at`` (seconds since the epoch, the
  store's :attr:`clock`) on each conversation, set by the writing transaction; ``updated_at`` is
  indexed, so a retention :meth:`sweep` finds what is due without reading everything. A version
  1 or 2 file is upgraded in place (its conversations get the upgrade's time): :mod:`chatlab.stores.sqlite_schema`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TypeVar

from ._group_commit import GroupCommitter, busy
from ._readers import Readers
from ._urls import path_from_url as path_from_url  # where it was before; open_store uses it
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
    StoreError,
    VersionMismatch,
    WriteResult,
    check_slice,
    new_version,
    prefix_upper_bound,
    version_matches,
)
from .sqlite_append import Outcome, Request, append_group
from .sqlite_one_step import OneStepAppends
from .sqlite_operations import SqliteOperations
from .sqlite_schema import SCHEMA_VERSION, ensure_schema, rollback

log = logging.getLogger(__name__)

#: A conversation's version, count and messages as one JSON array (positions are the primary key's order, which
#: the subquery's ORDER BY keeps: an aggregate's subquery is not flattened); bodies are UTF-8, joined byte for byte.
READ_ARRAY = (
    "SELECT version, message_count, CAST(coalesce((SELECT '[' || group_concat(body, ',') || ']' FROM (SELECT body "
    "FROM chatlab_messages WHERE conversation_key = ?1 ORDER BY position)), '[]') AS BLOB) "
    "FROM chatlab_conversations WHERE conversation_key = ?1"
)
EMPTY_ARRAY = ConversationArray(b"[]", 0, ABSENT)

WAL_CHECKPOINT_PAGES = 10_000
"""The WAL is copied into the database (a checkpoint, in the COMMIT that passes this many pages) less often than
SQLite's 1,000 pages: a checkpoint copies each page once however often it was rewritten, and a group commit rewrites
the same hot pages (index interiors, the conversations, the tables' last pages). Writer thread CPU per append in the
service: ~10% less; the WAL file grows to ~40 MB (4 KiB pages) before it is reused."""
EXPIRY_INTERVAL = 1.0
"""Seconds between deletions of expired idempotency records (a lookup ignores them meanwhile)."""


T = TypeVar("T")


class SqliteChatHistoryStore(SqliteOperations, ChatHistoryStore):
    """History in one SQLite database file (created with its tables on first use)."""

    schema_version = SCHEMA_VERSION

    def __init__(
        self, path: str | os.PathLike[str], *, busy_timeout: float = 5.0, reader_threads: int | None = None
    ) -> None:
        self.path = Path(path).expanduser().absolute()
        self.busy_timeout = busy_timeout
        self.description = f"Chat history is stored in the SQLite file {self.path} and exposed over HTTP."
        # at most as many as asyncio's default executor has (where reads ran before), each with its connection;
        # started and woken only as reads need them (:mod:`._readers`)
        threads = reader_threads if reader_threads is not None else min(32, (os.cpu_count() or 1) + 4)
        self._readers = Readers(self._connect, self._failure, self._too_slow, threads)
        self._one_step = OneStepAppends()
        self._writer = GroupCommitter(
            self._connect,
            self._failure,
            (VersionMismatch, IdempotencyKeyReused),
            one_step=(self._append_group, self._append_one_step),
        )
        self._schema_lock = threading.Lock()
        self._schema_ready = False
        self._next_expiry = 0.0  # when the writer thread next deletes expired idempotency records

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.path}>"

    # -- connections ------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path,
            timeout=self.busy_timeout,  # the busy handler: wait for other processes' write locks
            isolation_level=None,  # no implicit transactions: each function says BEGIN itself
            check_same_thread=False,  # used by one worker thread at a time, never concurrently
        )
        try:
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
            if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                # Switching to WAL needs the file to itself and SQLite does not wait for that
                # (no busy handler): retry while another connection or process holds it.
                with self._schema_lock:
                    mode = self._retry_while_busy(lambda: conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
                if str(mode).lower() != "wal":
                    raise StoreError(f"SQLite store {self.path}: cannot switch to WAL journal mode (got {mode!r})")
            ensure_schema(self, conn)  # once per store: a flag after the first time
        except BaseException:
            conn.close()
            raise
        return conn

    def _retry_while_busy(self, attempt: Callable[[], T]) -> T:
        deadline = time.monotonic() + self.busy_timeout
        while True:
            try:
                return attempt()
            except sqlite3.OperationalError as exc:
                if not busy(exc) or time.monotonic() > deadline:
                    raise
            time.sleep(0.01)

    async def _call(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return await self._readers.submit(work, time.monotonic() + self.busy_timeout)

    def _too_slow(self) -> StoreError:
        return StoreError(f"SQLite store {self.path} is busy: no answer within {self.busy_timeout:g} s")

    def _failure(self, exc: BaseException) -> BaseException:
        log.warning("SQLite store %s failed: %r", self.path, exc)
        return exc if isinstance(exc, StoreError) else StoreError(f"SQLite store {self.path}: {exc}")

    # -- the store interface ----------------------------------------------------------

    async def read(self, conversation_key: str) -> Conversation:
        def work(conn: sqlite3.Connection) -> Conversation:
            conn.execute("BEGIN")  # one snapshot for the version and the messages
            try:
                row = conn.execute(
                    "SELECT version FROM chatlab_conversations WHERE conversation_key = ?", (conversation_key,)
                ).fetchone()
                rows = conn.execute(
                    "SELECT body FROM chatlab_messages WHERE conversation_key = ? ORDER BY position",
                    (conversation_key,),
                ).fetchall()
            finally:
                rollback(conn)
            return Conversation([bytes(r[0]) for r in rows], row[0] if row is not None else ABSENT)

        return await self._call(work)

    async def read_array(self, conversation_key: str) -> ConversationArray:
        """One statement (its own snapshot) joins the array in SQLite: Python touches one value, and the thread
        lets go of the GIL once instead of once per message."""

        def work(conn: sqlite3.Connection) -> ConversationArray:
            row = conn.execute(READ_ARRAY, (conversation_key,)).fetchone()
            return ConversationArray(row[2], row[1], row[0]) if row is not None else EMPTY_ARRAY

        return await self._call(work)

    async def read_slice(self, conversation_key: str, after: int = 0, limit: int | None = None) -> ConversationSlice:
        check_slice(after, limit)

        def work(conn: sqlite3.Connection) -> ConversationSlice:
            conn.execute("BEGIN")  # one snapshot for the count, the version and the messages
            try:
                row = conn.execute(
                    "SELECT message_count, version FROM chatlab_conversations WHERE conversation_key = ?",
                    (conversation_key,),
                ).fetchone()
                rows = []
                if row is not None and limit != 0 and after < row[0]:  # a range of the primary key
                    rows = conn.execute(
                        "SELECT body FROM chatlab_messages WHERE conversation_key = ? AND position >= ? "
                        "ORDER BY position LIMIT ?",
                        (conversation_key, after, -1 if limit is None else limit),
                    ).fetchall()
            finally:
                rollback(conn)
            if row is None:
                return ConversationSlice([], after, 0, ABSENT)
            return ConversationSlice([bytes(r[0]) for r in rows], after, row[0], row[1])

        return await self._call(work)

    @staticmethod
    def _current(conn: sqlite3.Connection, conversation_key: str, if_match: Collection[str] | None) -> tuple[str, int]:
        """The conversation's version and count, checked against ``if_match`` (inside the write transaction)."""
        row = conn.execute(
            "SELECT version, message_count FROM chatlab_conversations WHERE conversation_key = ?", (conversation_key,)
        ).fetchone()
        current, count = (row[0], row[1]) if row is not None else (ABSENT, 0)
        if not version_matches(current, if_match):
            raise VersionMismatch(current)
        return current, count

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

        request: Request = (conversation_key, batch, if_match, idempotency)
        result: WriteResult = await self._writer.submit_batch(
            self._append_group, request, time.monotonic() + self.busy_timeout
        )
        return result

    def _append_group(self, conn: sqlite3.Connection, requests: list[Request]) -> list[Outcome]:
        """The appends queued together, in the writer thread: a few statements for all (:mod:`.sqlite_append`)."""
        now = time.time()
        return append_group(
            conn, requests, now, self.clock(), lambda: self._expire_records(conn, now), self._one_step.known.learn
        )

    def _append_one_step(self, conn: sqlite3.Connection, requests: list[Request]) -> list[Outcome] | None:
        """The same appends as one committed statement (:mod:`.sqlite_one_step`), unless expired records are due
        for deletion (that runs in :meth:`_append_group`'s transaction) or the statement finds a hint stale."""
        now = time.time()
        if now >= self._next_expiry:
            return None
        return self._one_step.attempt(conn, requests, now, self.clock())

    def _expire_records(self, conn: sqlite3.Connection, now: float) -> None:
        """Delete expired idempotency records, at most once per :data:`EXPIRY_INTERVAL` (the writer thread's)."""
        if now >= self._next_expiry:
            conn.execute("DELETE FROM chatlab_idempotency WHERE expires_at <= ?", (now,))
            self._next_expiry = now + EXPIRY_INTERVAL

    async def replace(
        self, conversation_key: str, messages: Sequence[EncodedMessage], *, if_match: Collection[str] | None = None
    ) -> WriteResult:
        batch = [bytes(m) for m in messages]

        def body(conn: sqlite3.Connection) -> WriteResult:
            self._one_step.known.forget([conversation_key])
            self._current(conn, conversation_key, if_match)
            version = new_version(len(batch))
            now = self.clock()
            conn.execute(
                "INSERT INTO chatlab_conversations (conversation_key, message_count, version, created_at, "
                "updated_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (conversation_key) DO UPDATE SET "
                "message_count = excluded.message_count, version = excluded.version, updated_at = excluded.updated_at",
                (conversation_key, len(batch), version, now, now),
            )
            conn.execute("DELETE FROM chatlab_messages WHERE conversation_key = ?", (conversation_key,))
            conn.executemany(
                "INSERT INTO chatlab_messages (conversation_key, position, body) VALUES (?, ?, ?)",
                [(conversation_key, i, m) for i, m in enumerate(batch)],
            )
            return WriteResult(version)

        return await self._writer.submit(body, time.monotonic() + self.busy_timeout)

    async def delete(self, conversation_key: str, *, if_match: Collection[str] | None = None) -> None:
        def body(conn: sqlite3.Connection) -> None:
            self._one_step.known.forget([conversation_key])
            self._current(conn, conversation_key, if_match)
            conn.execute("DELETE FROM chatlab_conversations WHERE conversation_key = ?", (conversation_key,))
            conn.execute("DELETE FROM chatlab_messages WHERE conversation_key = ?", (conversation_key,))

        await self._writer.submit(body, time.monotonic() + self.busy_timeout)

    async def summaries(self, prefix: str = "") -> list[ConversationSummary]:
        def work(conn: sqlite3.Connection) -> list[ConversationSummary]:
            # TEXT compares with BINARY collation: UTF-8 byte order, which is code point order.
            query = "SELECT conversation_key, message_count, version, created_at, updated_at FROM chatlab_conversations"
            params: list[str] = []
            if prefix:
                query += " WHERE conversation_key >= ?"
                params.append(prefix)
                upper = prefix_upper_bound(prefix)
                if upper is not None:
                    query += " AND conversation_key < ?"
                    params.append(upper)
            rows = conn.execute(query + " ORDER BY conversation_key", params).fetchall()
            return [ConversationSummary(*row) for row in rows]

        return await self._call(work)

    async def close(self) -> None:
        """End the writer thread and close the idle connections (a later call opens new ones)."""
        await asyncio.to_thread(self._writer.stop)
        await asyncio.to_thread(self._readers.stop)
