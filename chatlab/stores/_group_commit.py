"""Group commit for SQLite: the writes waiting at one moment share one transaction and one fsync.

A SQLite file takes one writer at a time, and with ``synchronous=FULL`` every commit waits for
the disk. Writing each request in a transaction of its own caps a service at one fsync per
append. :class:`GroupCommitter` has one writer thread: it takes every write queued while the
previous commit ran, runs each in a savepoint of one ``BEGIN IMMEDIATE`` transaction (a write
that refuses, a failed ``If-Match`` or a reused idempotency key, rolls back to its savepoint and
touches nothing of the others), takes in the writes queued meanwhile, commits once, and only then
answers each caller. So an acknowledged write is as durable as before (committed and fsync'ed
before its answer); what changes is that sixteen concurrent appends cost one fsync instead of
sixteen. Requests of a batch (:meth:`GroupCommitter.submit_batch`, the store's appends) queued side
by side run in one call, which checks each before writing anything for it (no savepoints). A group made only of
such requests may first be offered to ``one_step`` (the store's appends: :mod:`.sqlite_one_step`), which writes
and commits them in one statement of its own, or writes nothing and leaves them to the transaction.

A write may carry a deadline (``submit(work, deadline=...)``, :func:`time.monotonic` seconds): one whose
group has not begun by then fails without running (the store's timeout), and a group waits for another
process's write lock only until the earliest deadline among its writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

Work = Callable[[sqlite3.Connection], Any]
Batch = Callable[[sqlite3.Connection, list[Any]], list[tuple[Any, BaseException | None]]]
"""Runs several requests at once: one (result, refusal) per request, in order (:meth:`GroupCommitter.submit_batch`)."""
SAVEPOINT, PLAIN, BATCH = 0, 1, 2
"""How a queued write runs: a work in a savepoint of its own, a work without one, or a request of a batch."""
_Item = tuple[Work | Batch, asyncio.AbstractEventLoop, "asyncio.Future[Any]", float, int, Any]
Answer = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Any, BaseException | None]
"""A caller's loop and future, and what to answer: a result, or an exception."""
OneStep = Callable[[sqlite3.Connection, list[Any]], list[tuple[Any, BaseException | None]] | None]
"""Tries a batch's requests as one committed statement of its own (no ``BEGIN``): their outcomes, or ``None``
when nothing was written and the group must run in a transaction (:mod:`.sqlite_one_step`)."""

MAX_GROUP = 256
"""At most this many writes share a transaction (bounds how long the write lock is held)."""
ONE_STEP_GROUP = 8
"""Where a one-step batch is set, a group takes at most this many queued writes (a transaction, if it comes to one,
still takes in the rest): the next group then gathers while this one is written, its requests read by the loop
while the writer commits, two groups in turn. Under the bench's append load, alternating runs against the
ceiling: 16 connections 0.27-0.30 -> 0.31-0.39 of it with groups of at most 8 (at most 4: 0.31, 12: 0.34);
64 connections 0.31 -> 0.34 (at most 16: 0.43)."""


def busy(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite refused because another connection holds a lock (worth waiting for, or going another way)."""
    return "locked" in str(exc) or "busy" in str(exc)


class GroupCommitter:
    """One writer thread for a SQLite file; :meth:`submit` runs a write in the next group commit.

    ``connect`` opens a ready connection (WAL, schema); ``failure`` turns a database error
    into the exception callers get (a :class:`~chatlab.stores.base.StoreError`); exceptions
    in ``answers`` (refusals) reach the caller as they are and leave the connection in use.
    """

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        failure: Callable[[BaseException], BaseException],
        answers: tuple[type[BaseException], ...],
        one_step: tuple[Batch, OneStep] | None = None,
    ) -> None:
        self._connect = connect
        self._one_step = one_step
        self._failure = failure
        self._answers = answers
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._patience = 0  # ms a write without a deadline waits for the lock: the connection's busy_timeout

    async def submit(
        self, work: Callable[[sqlite3.Connection], T], deadline: float = float("inf"), *, savepoint: bool = True
    ) -> T:
        """Run ``work`` inside the next group's transaction; return once that transaction is committed.

        ``savepoint=False`` is for a write that refuses (raises one of ``answers``) only before it writes
        anything: it runs without a savepoint of its own (two statements fewer), as nothing would need undoing.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._ensure_thread()
        self._queue.put((work, loop, future, deadline, SAVEPOINT if savepoint else PLAIN, None))
        return await future

    async def submit_batch(self, batch: Batch, request: Any, deadline: float = float("inf")) -> Any:
        """Run ``request`` in the next group, with the requests for the same ``batch`` queued next to it: one call
        ``batch(conn, requests)`` for all. ``batch`` refuses a request by giving its exception (one of ``answers``)
        instead of a result, and must decide that before writing anything for it: there is no savepoint."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._ensure_thread()
        self._queue.put((batch, loop, future, deadline, BATCH, request))
        return await future

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="chatlab-sqlite-writer", daemon=True)
                self._thread.start()

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
        """The next write (waiting for one) and the writes queued behind it, up to :data:`MAX_GROUP` (with a
        one-step batch: :data:`ONE_STEP_GROUP`)."""
        first = self._queue.get()
        if first is None:
            return None
        return [first, *self._queued((MAX_GROUP if self._one_step is None else ONE_STEP_GROUP) - 1)]

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
        busy timeout). One statement when the lock is free: no ``PRAGMA busy_timeout`` per group (a statement
        prepared anew each time, as its text held the wait)."""
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
        """Run ``group`` (and the writes queued while it runs: :meth:`_absorb`) in one transaction; answer once
        committed. ``group`` is extended in place, so whoever called sees every write that was in it."""
        self._drop_late(group)
        if not group or self._in_one_step(conn, group):
            return
        self._begin(conn, min(item[3] for item in group))
        outcomes: list[tuple[Any, BaseException | None]] = []
        try:
            self._run_from(conn, group, outcomes)
            while self._absorb(group):
                self._run_from(conn, group, outcomes)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        _settle_group(group, outcomes)

    def _in_one_step(self, conn: sqlite3.Connection, group: list[_Item]) -> bool:
        """Whether ``group``, all requests of the one-step batch, was written and answered by its one statement
        (which leaves the writes queued meanwhile to the next group: they overlap this one's fsync)."""
        if self._one_step is None:
            return False
        batch, attempt = self._one_step
        if not all(item[4] == BATCH and item[0] == batch for item in group):
            return False
        outcomes = attempt(conn, [item[5] for item in group])
        if outcomes is None:
            return False
        _settle_group(group, outcomes)
        return True

    def _drop_late(self, items: list[_Item]) -> None:
        """Answer the writes whose deadline passed before their group began (a timeout) and remove them."""
        now = time.monotonic()
        if any(item[3] <= now for item in items):
            late = self._failure(TimeoutError("the write waited past the store timeout"))
            settle([(item[1], item[2], None, late) for item in items if item[3] <= now])
            items[:] = [item for item in items if item[3] > now]

    def _absorb(self, group: list[_Item]) -> bool:
        """Writes queued while the group ran join it before its COMMIT, up to :data:`MAX_GROUP` (those already
        queued only: no wait). In the service the statements take a while (the writer thread waits for the GIL
        after each): writes that came meanwhile share this fsync instead of waiting for the next."""
        more = self._queued(MAX_GROUP - len(group))
        self._drop_late(more)
        group += more
        return bool(more)

    def _run_from(self, conn: sqlite3.Connection, group: list[_Item], outcomes: list[Any]) -> None:
        """Run the writes of ``group`` from ``len(outcomes)`` on: each batch's requests queued side by side in one
        call, any other write alone."""
        at = len(outcomes)
        while at < len(group):
            work, mode = group[at][0], group[at][4]
            if mode == BATCH:
                end = at + 1
                while end < len(group) and group[end][4] == BATCH and group[end][0] == work:
                    end += 1
                outcomes += work(conn, [item[5] for item in group[at:end]])  # type: ignore[call-arg]
                at = end
                continue
            outcomes.append(self._run(conn, work, mode == SAVEPOINT))  # type: ignore[arg-type]
            at += 1

    def _run(self, conn: sqlite3.Connection, work: Work, savepoint: bool) -> tuple[Any, BaseException | None]:
        """One work's (result, refusal); in a savepoint unless it refuses only before writing."""
        if not savepoint:
            try:
                return work(conn), None
            except self._answers as refused:  # raised before it wrote anything
                return None, refused
        conn.execute("SAVEPOINT chatlab_write")
        try:
            outcome: tuple[Any, BaseException | None] = (work(conn), None)
        except self._answers as refused:
            conn.execute("ROLLBACK TO chatlab_write")
            outcome = (None, refused)
        conn.execute("RELEASE chatlab_write")
        return outcome


def _settle_group(group: list[_Item], outcomes: list[tuple[Any, BaseException | None]]) -> None:
    """Answer each write of ``group`` with its outcome."""
    settle([(loop, future, *outcome) for (_, loop, future, *_), outcome in zip(group, outcomes, strict=True)])


def settle(answers: list[Answer]) -> None:
    """Answer callers on their own loops, one call per loop (a caller that gave up, or a closed loop, is not
    waiting): one wake-up of the loop for a whole group."""
    by_loop: dict[asyncio.AbstractEventLoop, list[Answer]] = {}
    for answer in answers:
        by_loop.setdefault(answer[0], []).append(answer)
    for loop, some in by_loop.items():
        with contextlib.suppress(RuntimeError):  # the loop is closed
            loop.call_soon_threadsafe(_answer, some)


def _answer(answers: list[Answer]) -> None:
    for _, future, result, error in answers:
        if future.done():
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)
