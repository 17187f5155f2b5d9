"""Chat history in a SQLite file: embedded, persistent, no server to run (docs/stores.md). ``sqlite3`` runs in
threads so that the event loop never waits on the disk: reads on reader threads that hand answers back in batches
(:mod:`.readers`), writes on one writer thread that commits those waiting at one moment together (:mod:`.writer`)."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TypeVar, cast

from ...authors import count_authors
from ..append_rule import changes_nothing
from ..base import (
    ChatHistoryStore,
    Conversation,
    ConversationArray,
    ConversationRecord,
    ConversationSlice,
    ConversationSummary,
    EncodedMessage,
    Idempotency,
    Metadata,
    StoreError,
    WriteResult,
    check_slice,
)
from ..metadata import MetadataChange
from . import reads, writes
from .readers import Readers
from .schema import SCHEMA_VERSION, ensure_schema
from .writer import GroupCommitter, busy

log = logging.getLogger(__name__)

T = TypeVar("T")

SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")  # PRAGMA synchronous levels (what each survives: docs/stores.md)


class SqliteChatHistoryStore(ChatHistoryStore):
    """History in one SQLite database file (created with its tables on first use; the settings: docs/stores.md).
    ``busy_timeout``: seconds within which every operation ends, waits included (one not started by then fails, 503,
    and writes nothing). ``reader_threads``: at most this many (default: as asyncio's default executor)."""

    schema_version = SCHEMA_VERSION

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 5.0,
        synchronous: str = "FULL",
        reader_threads: int | None = None,
        reader_patience: float = 0.002,
        wal_autocheckpoint: int = 10_000,
    ) -> None:
        self.path = Path(path).expanduser().absolute()
        if synchronous.upper() not in SYNCHRONOUS:
            raise ValueError(f"synchronous={synchronous!r}: use one of {', '.join(SYNCHRONOUS)}")
        if wal_autocheckpoint < 0:
            raise ValueError(f"wal_autocheckpoint={wal_autocheckpoint}: give a number of pages, 0 or more")
        self.busy_timeout = busy_timeout
        self.synchronous = synchronous.upper()
        self.wal_autocheckpoint = wal_autocheckpoint
        self.description = f"Chat history is stored in the SQLite file {self.path} and exposed over HTTP."
        self._schema_lock = threading.Lock()
        self._schema_ready = False
        threads = reader_threads if reader_threads is not None else min(32, (os.cpu_count() or 1) + 4)
        self.readers = Readers(self.connect, self._failure, self._too_slow, threads, reader_patience)
        self.writer = GroupCommitter(self.connect, self._failure)
        self._appends = writes.Appends(lambda: self.clock())

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.path}>"

    def connect(self) -> sqlite3.Connection:
        """A new connection in WAL mode with the store's settings, the tables in place (made ready by the first)."""
        conn = sqlite3.connect(
            self.path,
            timeout=self.busy_timeout,  # the busy handler: wait for other processes' write locks
            isolation_level=None,  # no implicit transactions: each function says BEGIN itself
            check_same_thread=False,  # used by one thread at a time (the thread that opened it, or a successor)
        )
        try:
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            conn.execute(f"PRAGMA wal_autocheckpoint={self.wal_autocheckpoint}")
            if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                with self._schema_lock:
                    mode = self._switch_to_wal(conn)
                if str(mode).lower() != "wal":
                    raise StoreError(f"SQLite store {self.path}: cannot switch to WAL journal mode (got {mode!r})")
            with self._schema_lock:
                if not self._schema_ready:
                    ensure_schema(conn, self.clock(), self.path)
                    self._schema_ready = True
        except BaseException:
            conn.close()
            raise
        return conn

    def _switch_to_wal(self, conn: sqlite3.Connection) -> object:
        """Switching needs the file to itself and SQLite does not wait for that (no busy handler): retry."""
        deadline = time.monotonic() + self.busy_timeout
        while True:
            try:
                return conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            except sqlite3.OperationalError as exc:
                if not busy(exc) or time.monotonic() > deadline:
                    raise
            time.sleep(0.01)

    def _deadline(self) -> float:
        return time.monotonic() + self.busy_timeout

    async def _read(self, work: Callable[..., T], *args: object) -> T:
        return await self.readers.submit(lambda conn: work(conn, *args), self._deadline())

    async def _write(self, work: Callable[..., T], *args: object) -> T:
        return await self.writer.submit(lambda conn: work(conn, *args), self._deadline())

    def _too_slow(self) -> StoreError:
        return StoreError(f"SQLite store {self.path} is busy: no answer within {self.busy_timeout:g} s")

    def _failure(self, exc: BaseException) -> BaseException:
        log.warning("SQLite store %s failed: %r", self.path, exc)
        return exc if isinstance(exc, StoreError) else StoreError(f"SQLite store {self.path}: {exc}")

    async def read(self, conversation_key: str) -> Conversation:
        """One statement on a reader thread: one snapshot."""
        whole = await self.read_slice(conversation_key)
        return Conversation(whole.messages, whole.version)

    async def read_array(self, conversation_key: str) -> ConversationArray:
        """The JSON array joined inside SQLite, in one statement on a reader thread."""
        return await self._read(reads.read_array, conversation_key)

    async def read_slice(self, conversation_key: str, after: int = 0, limit: int | None = None) -> ConversationSlice:
        """The range asked for, in one statement on a reader thread."""
        check_slice(after, limit)
        return await self._read(reads.read_slice, conversation_key, after, limit)

    async def summaries(
        self,
        prefix: str = "",
        *,
        after: str | None = None,
        limit: int | None = None,
        tags: Mapping[str, str] | None = None,
        plain: bool = False,
    ) -> list[ConversationSummary]:
        """A range of the key index (``plain``: of the plain keys' partial index), on a reader thread."""
        return await self._read(reads.summaries, prefix, after, limit, tags, plain)

    async def set_metadata(
        self,
        conversation_key: str,
        change: MetadataChange,
        *,
        expected: Metadata | None = None,
        if_match: Collection[str] | None = None,
    ) -> ConversationSummary | None:
        """In the writer's next group transaction, over ``if_match`` and ``expected`` when given."""
        return await self._write(writes.set_metadata, conversation_key, change, expected, if_match)

    async def append(
        self,
        conversation_key: str,
        messages: Sequence[EncodedMessage],
        *,
        if_match: Collection[str] | None = None,
        idempotency: Idempotency | None = None,
    ) -> WriteResult:
        """Queued for the writer's next group and decided there with the appends beside it."""
        if changes_nothing(messages, if_match, idempotency):
            return WriteResult(await self.version(conversation_key))
        batch = [bytes(m) for m in messages]
        request = writes.Append(conversation_key, batch, if_match, idempotency, count_authors(batch))
        return cast(WriteResult, await self.writer.submit_batch(self._appends, request, self._deadline()))

    async def replace(
        self, conversation_key: str, messages: Sequence[EncodedMessage], *, if_match: Collection[str] | None = None
    ) -> WriteResult:
        """In a savepoint of the writer's next group transaction."""
        return await self._write(writes.replace, conversation_key, [bytes(m) for m in messages], if_match, self.clock())

    async def delete(self, conversation_key: str, *, if_match: Collection[str] | None = None) -> None:
        """In a savepoint of the writer's next group transaction."""
        await self._write(writes.delete, conversation_key, if_match)

    async def restore(self, records: Sequence[ConversationRecord]) -> None:
        """In a savepoint of the writer's next group transaction: all the records or none."""
        await self.writer.submit(lambda conn: writes.restore(conn, records))

    async def sweep(self) -> int:
        """In the writer's next group transaction, through the ``updated_at`` index."""
        cutoff = self.cutoff()
        if cutoff is None:
            return 0
        return await self.writer.submit(lambda conn: writes.sweep(conn, cutoff))

    async def close(self) -> None:
        """End the writer and reader threads, closing their connections (a later call starts new ones)."""
        await asyncio.to_thread(self.writer.stop)
        await asyncio.to_thread(self.readers.stop)
