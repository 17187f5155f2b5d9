"""The SQLite store's writer thread: group commit, so that concurrent writes share one transaction and one fsync.

A SQLite file takes one writer at a time, and with ``synchronous=FULL`` every commit waits for the disk: a
transaction per request caps a service at one fsync per write. :class:`GroupCommitter` has one writer thread. It
takes every write queued while the previous commit ran into one ``BEGIN IMMEDIATE`` transaction, takes in the
writes queued meanwhile, commits once, and only then answers each caller. An acknowledged write is as durable as
alone (committed, and fsync'ed as the synchronous level says, before its answer); concurrent writes share the cost.

Each write stands or falls alone. A write submitted with :meth:`GroupCommitter.submit` runs in a savepoint of its
own: a refusal (one of ``answers``: a failed ``If-Match``) rolls back to it and touches nothing of the others. The
requests of a batch (:meth:`GroupCommitter.submit_batch`, the store's appends) queued side by side run in one call,
which checks each before writing anything for it (no savepoints needed), so a group of appends costs a few
statements whatever their number.

A write carries a deadline (:func:`time.monotonic` seconds): one whose group has not begun by then fails without
running (the store's timeout), and a group waits for another process's write lock only until the earliest
deadline among its writes.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from .answers import settle
from .connections import busy

T = TypeVar("T")

Work = Callable[[sqlite3.Connection], Any]
Batch = Callable[[sqlite3.Connection, list[Any]], list[tuple[Any, BaseException | None]]]
"""Runs several requests at once: one (result, refusal) per request, in order (:meth:`GroupCommitter.submit_batch`)."""
_Item = tuple[Work | Batch, asyncio.AbstractEventLoop, "asyncio.Future[Any]", float, bool, Any]
"""A queued write: what runs it, the caller's loop and future, its deadline, whether it is a batch's request, and
that request."""
Outcome = tuple[Any, BaseException | None]

MAX_GROUP = 256
"""At most this many writes share a transaction: under a steady stream of writes a group still commits (and answers
its first writes) after a bounded amount of work. It is the largest power of two for which a batch's lookup of
idempotency records (two parameters an append, one more for the time) stays within the 999 parameters every SQLite
allows."""


class GroupCommitter:
    """One writer thread for a SQLite file; :meth:`submit` runs a write in the next group commit.

    ``connect`` opens a ready connection (:meth:`.connections.Connections.open`); ``failure`` turns a database
    error into the exception callers get (a :class:`~chatlab.stores.base.StoreError`); exceptions in ``answers``
    (refusals) reach the caller as they are and leave the transaction going. :attr:`groups` and :attr:`writes`
    count the transactions committed and the writes they held.
    """

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        failure: Callable[[BaseException], BaseException],
        answers: tuple[type[BaseException], ...],
    ) -> None:
        self._connect = connect
        self._failure = failure
        self._answers = answers
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._patience = 0  # ms a write without a deadline waits for the lock: the connection's busy timeout
        self.groups = 0
        self.writes = 0

    async def submit(self, work: Callable[[sqlite3.Connection], T], deadline: float = float("inf")) -> T:
        """Run ``work`` in a savepoint of the next group's transaction; return once that transaction is committed."""
        result: T = await self._put(work, deadline, False, None)
        return result

    async def submit_batch(self, batch: Batch, request: Any, deadline: float = float("inf")) -> Any:
        """Run ``request`` in the next group, with the requests for the same ``batch`` queued next to it: one call
        ``batch(conn, requests)`` for all. ``batch`` refuses a request by giving its exception (one of ``answers``)
        instead of a result, and must decide that before writing anything for it: there is no savepoint."""
        return await self._put(batch, deadline, True, request)

    async def _put(self, runs: Work | Batch, deadline: float, batched: bool, request: Any) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="chatlab-sqlite-writer", daemon=True)
                self._thread.start()
        self._queue.put((runs, loop, future, deadline, batched, request))
        return await future

    def stop(self) -> None:
        """Finish the queued writes, then end the writer thread (a later write starts a new one)."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join()

    # -- the writer thread ------------------------------------------------------------

    def _serve(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                group = self._next_group()
                if group is None:
                    return
                try:
                    conn = conn or self._open()
                    self._commit(conn, group)
                except Exception as exc:  # the whole group failed: nothing of it was committed
                    error = self._failure(exc) if isinstance(exc, sqlite3.Error | OSError) else exc
                    settle([(loop, future, None, error) for _, loop, future, *_ in group])
                    if conn is not None:
                        conn.close()
                        conn = None  # a fresh connection for the next group
        finally:
            if conn is not None:
                conn.close()

    def _next_group(self) -> list[_Item] | None:
        """The next write (waiting for one) and the writes queued behind it, up to :data:`MAX_GROUP`."""
        first = self._queue.get()
        if first is None:
            return None
        return [first, *self._queued(MAX_GROUP - 1)]

    def _queued(self, room: int) -> list[_Item]:
        """The writes queued now, at most ``room`` (no wait); a stop request ends the list, kept for the outer loop."""
        items: list[_Item] = []
        while len(items) < room:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                self._queue.put(None)  # stop after this group
                break
            items.append(item)
        return items

    def _open(self) -> sqlite3.Connection:
        """The writer's connection, with no busy wait of its own: :meth:`_begin` sets one when the lock is taken."""
        conn = self._connect()
        self._patience = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
        conn.execute("PRAGMA busy_timeout = 0")
        return conn

    def _begin(self, conn: sqlite3.Connection, deadline: float) -> None:
        """``BEGIN IMMEDIATE``, waiting for another process's write lock until ``deadline`` (none: the connection's
        busy timeout). One statement when the lock is free; the wait is set only when the lock is taken."""
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

    def _commit(self, conn: sqlite3.Connection, group: list[_Item]) -> None:
        """Run ``group`` (and the writes queued while it runs) in one transaction; answer once committed. ``group``
        is extended in place, so that a failure answers every write that was in it."""
        self._drop_late(group)
        if not group:
            return
        self._begin(conn, min(item[3] for item in group))
        outcomes: list[Outcome] = []
        try:
            self._run_from(conn, group, outcomes)
            while self._absorb(group):
                self._run_from(conn, group, outcomes)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        self.groups += 1
        self.writes += len(group)
        settle([(loop, future, *outcome) for (_, loop, future, *_), outcome in zip(group, outcomes, strict=True)])

    def _drop_late(self, items: list[_Item]) -> None:
        """Answer the writes whose deadline passed before their group began (a timeout) and remove them."""
        now = time.monotonic()
        if any(item[3] <= now for item in items):
            late = self._failure(TimeoutError("the write waited past the store timeout"))
            settle([(item[1], item[2], None, late) for item in items if item[3] <= now])
            items[:] = [item for item in items if item[3] > now]

    def _absorb(self, group: list[_Item]) -> bool:
        """Writes queued while the group ran join it before its COMMIT, up to :data:`MAX_GROUP` (those already
        queued only: no wait), and share its fsync instead of waiting for the next."""
        more = self._queued(MAX_GROUP - len(group))
        self._drop_late(more)
        group += more
        return bool(more)

    def _run_from(self, conn: sqlite3.Connection, group: list[_Item], outcomes: list[Outcome]) -> None:
        """Run the writes of ``group`` from ``len(outcomes)`` on: each batch's requests queued side by side in one
        call, any other write alone in a savepoint."""
        at = len(outcomes)
        while at < len(group):
            runs, batched = group[at][0], group[at][4]
            if batched:
                end = at + 1
                while end < len(group) and group[end][4] and group[end][0] == runs:
                    end += 1
                outcomes += runs(conn, [item[5] for item in group[at:end]])  # type: ignore[call-arg]
                at = end
            else:
                outcomes.append(self._run(conn, runs))  # type: ignore[arg-type]
                at += 1

    def _run(self, conn: sqlite3.Connection, work: Work) -> Outcome:
        """One write's (result, refusal), in a savepoint: a refusal undoes what it wrote, and only that."""
        conn.execute("SAVEPOINT chatlab_write")
        try:
            outcome: Outcome = (work(conn), None)
        except self._answers as refused:
            conn.execute("ROLLBACK TO chatlab_write")
            outcome = (None, refused)
        conn.execute("RELEASE chatlab_write")
        return outcome
