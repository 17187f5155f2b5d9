"""The SQLite store's writer thread: group commit (docs/stores.md). The writes queued while the previous commit ran,
and those queued meanwhile, share one ``BEGIN IMMEDIATE`` transaction and one fsync; each caller is answered once it
is committed (as durable as alone). A write whose group has not begun by its deadline fails without running."""

from __future__ import annotations

import asyncio
import itertools
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar, cast

from ..base import IdempotencyKeyReused, MetadataChanged, VersionMismatch
from ..metadata import MetadataError
from .answers import settle
from .schema import rollback

T = TypeVar("T")

Outcome = tuple[Any, BaseException | None]  # a write's result, or the refusal its caller gets
Batch = Callable[[sqlite3.Connection, list[Any]], list[Outcome]]  # runs several requests: one outcome each, in order

ANSWERS = (VersionMismatch, IdempotencyKeyReused, MetadataChanged, MetadataError)  # refusals: the group goes on

MAX_GROUP = 256
"""Writes per transaction at most (a steady stream still commits): the largest power of two for which a batch's lookup
of idempotency records (two parameters an append, one for the time) stays within the 999 parameters of any SQLite."""


def busy(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite refused because another connection holds a lock (worth waiting for)."""
    return "locked" in str(exc) or "busy" in str(exc)


class _Write(NamedTuple):
    batch: Batch
    request: Any
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    deadline: float


def _settle(writes: list[_Write], outcomes: list[Outcome]) -> None:
    settle([(write.loop, write.future, *outcome) for write, outcome in zip(writes, outcomes, strict=True)])


class GroupCommitter:
    """One writer thread, started by the first write (:attr:`groups`, :attr:`writes`: commits and the writes in them).
    ``failure``: a database error as the callers' exception."""

    def __init__(
        self, connect: Callable[[], sqlite3.Connection], failure: Callable[[BaseException], BaseException]
    ) -> None:
        self._connect = connect
        self._failure = failure
        self._queue: queue.SimpleQueue[_Write | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._patience = 0  # ms a write without a deadline waits for the lock: the connection's busy timeout
        self.groups = 0
        self.writes = 0

    async def submit(self, work: Callable[[sqlite3.Connection], T], deadline: float = float("inf")) -> T:
        """Run ``work`` in a savepoint of the next group's transaction; return once that transaction is committed."""
        return cast(T, await self.submit_batch(self._in_savepoints, work, deadline))

    async def submit_batch(self, batch: Batch, request: Any, deadline: float = float("inf")) -> Any:
        """Run ``request`` in the next group, in one call ``batch(conn, requests)`` with the requests for ``batch``
        queued next to it. No savepoint: ``batch`` refuses a request (one of :data:`ANSWERS`) before writing for it."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="chatlab-sqlite-writer", daemon=True)
                self._thread.start()
        self._queue.put(_Write(batch, request, loop, future, deadline))
        return await future

    def stop(self) -> None:
        """Finish the queued writes, then end the writer thread (a later write starts a new one)."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join()

    def _serve(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while (first := self._queue.get()) is not None:
                group = [first, *self._queued(MAX_GROUP - 1)]
                try:
                    if conn is None:  # with no busy wait of its own: _begin sets one when the lock is taken
                        conn = self._connect()
                        self._patience = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
                        conn.execute("PRAGMA busy_timeout = 0")
                    self._commit(conn, group)
                except Exception as exc:  # the whole group failed: nothing of it was committed
                    error = self._failure(exc) if isinstance(exc, sqlite3.Error | OSError) else exc
                    _settle(group, [(None, error)] * len(group))
                    if conn is not None:
                        conn.close()
                        conn = None  # a fresh connection for the next group
        finally:
            if conn is not None:
                conn.close()

    def _queued(self, room: int) -> list[_Write]:
        """The writes queued now, at most ``room`` (no wait); a stop request ends the list."""
        writes: list[_Write] = []
        while len(writes) < room:
            try:
                write = self._queue.get_nowait()
            except queue.Empty:
                break
            if write is None:
                self._queue.put(None)  # stop after this group
                break
            writes.append(write)
        return writes

    def _begin(self, conn: sqlite3.Connection, deadline: float) -> None:
        """``BEGIN IMMEDIATE``, waiting for another process's write lock until ``deadline`` (infinite: patience): one
        statement when the lock is free, the wait is set only when it is taken."""
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if not busy(exc):
                raise
        wait = deadline - time.monotonic()
        conn.execute(f"PRAGMA busy_timeout = {self._patience if wait == float('inf') else max(0, int(wait * 1000))}")
        try:
            conn.execute("BEGIN IMMEDIATE")
        finally:
            conn.execute("PRAGMA busy_timeout = 0")

    def _commit(self, conn: sqlite3.Connection, group: list[_Write]) -> None:
        """Run ``group`` and the writes queued meanwhile (added to it: a failure answers each) in one transaction."""
        self._drop_late(group)
        if not group:
            return
        self._begin(conn, min(write.deadline for write in group))
        try:
            outcomes = self._run(conn, group)
            while more := self._queued(MAX_GROUP - len(group)):  # they share this fsync instead of the next
                self._drop_late(more)
                group += more
                outcomes += self._run(conn, more)
            conn.execute("COMMIT")
        except BaseException:
            rollback(conn)
            raise
        self.groups += 1
        self.writes += len(group)
        _settle(group, outcomes)

    def _drop_late(self, writes: list[_Write]) -> None:
        """Answer and remove the writes whose deadline passed before their group began."""
        now = time.monotonic()
        late = [write for write in writes if write.deadline <= now]
        if late:
            error = self._failure(TimeoutError("the write waited past the store timeout"))
            _settle(late, [(None, error)] * len(late))
            writes[:] = [write for write in writes if write.deadline > now]

    @staticmethod
    def _run(conn: sqlite3.Connection, writes: list[_Write]) -> list[Outcome]:
        """One call for each run of requests of one batch queued side by side."""
        outcomes: list[Outcome] = []
        for batch, run in itertools.groupby(writes, key=lambda write: write.batch):
            outcomes += batch(conn, [write.request for write in run])
        return outcomes

    def _in_savepoints(
        self, conn: sqlite3.Connection, works: list[Callable[[sqlite3.Connection], Any]]
    ) -> list[Outcome]:
        """Writes submitted alone, each in a savepoint: a refusal undoes what it wrote, and only that."""
        outcomes: list[Outcome] = []
        for work in works:
            conn.execute("SAVEPOINT chatlab_write")
            try:
                outcomes.append((work(conn), None))
            except ANSWERS as refused:
                conn.execute("ROLLBACK TO chatlab_write")
                outcomes.append((None, refused))
            conn.execute("RELEASE chatlab_write")
        return outcomes
