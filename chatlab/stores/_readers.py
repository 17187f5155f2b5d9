"""Reader threads for SQLite: each keeps its own connection, answers the event loop once per batch, and wakes only
when the threads already running cannot take the read soon.

``asyncio.to_thread`` costs the loop more than a small read itself: a context copy, an executor work item, a
concurrent future chained to an asyncio one, and one wake-up of the loop per read. Here a read is a tuple on a
queue; a thread runs the reads waiting there one after another on its connection (its statements stay
prepared) and hands back all their answers in one ``call_soon_threadsafe``.

Threads wake on need, not on every read: a pool whose idle threads all waited on the queue woke one per read, and
each woken thread then queued for the GIL behind the loop and the others (2-CPU machine, the bench's 16-connection
GET load through the service: 6 threads ~4,600 reads/s at ~250 µs of CPU each, one thread ~6,800/s at ~150 µs). A
read queued while a thread is running reads is left to that thread; another thread is woken (or started, up to
``threads``) only when none runs, or when each running one has been on its current read for :data:`SLOW` seconds
(a long read, say a 10,000-message history, does not hold up the short ones behind it).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from ._group_commit import Answer, settle

T = TypeVar("T")

Work = Callable[[sqlite3.Connection], Any]
_Item = tuple[Work, asyncio.AbstractEventLoop, "asyncio.Future[Any]", float]

BATCH = 16
"""At most this many answers wait for a thread's next hand-back (a thread runs reads while more are queued)."""
SLOW = 0.002
"""Seconds a thread may be on one read before a read queued behind it wakes another thread, and before the answers
it holds are handed back without it."""
NOT_WATCHING = -float("inf")
"""The due time recorded while no :meth:`Readers._watch` is scheduled."""


class _Reader:
    """One thread's state: the answers it holds for its next hand-back, when its current read began, and ``wake``,
    which it waits to acquire while parked (held then: releasing it wakes the thread)."""

    __slots__ = ("answers", "began", "wake")

    def __init__(self) -> None:
        self.answers: list[Answer] = []
        self.began = time.monotonic()
        self.wake = threading.Lock()
        self.wake.acquire()


class Readers:
    """Up to ``threads`` reader threads, started when needed; :meth:`submit` runs a read in one of them.

    ``connect`` opens a ready connection; ``failure`` turns a database error into the caller's exception;
    ``too_slow`` is the exception of a read that waited past its deadline for a thread.
    """

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        failure: Callable[[BaseException], BaseException],
        too_slow: Callable[[], BaseException],
        threads: int,
    ) -> None:
        self._connect = connect
        self._failure = failure
        self._too_slow = too_slow
        self._count = threads
        self._lock = threading.Lock()  # guards everything below and the readers' answers
        self._items: deque[_Item] = deque()
        self._running: list[_Reader] = []
        self._parked: list[_Reader] = []
        self._threads: list[threading.Thread] = []
        self._stopping = False
        self._watch_due = NOT_WATCHING  # when the scheduled :meth:`_watch` should run

    async def submit(self, work: Callable[[sqlite3.Connection], T], deadline: float) -> T:
        """Run ``work`` on a reader thread's connection unless ``deadline`` passes before a thread takes it."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._lock:
            self._items.append((work, loop, future, deadline))
            now = time.monotonic()
            if self._stuck(now):
                self._wake()
            if now > self._watch_due + SLOW:  # none scheduled, or lost with a loop that closed
                self._watch_soon(loop, now)
        return await future

    def _watch_soon(self, loop: asyncio.AbstractEventLoop, now: float) -> None:
        """Schedule :meth:`_watch` in :data:`SLOW` on ``loop``, replacing any scheduled before (holding the lock)."""
        self._watch_due = due = now + SLOW
        loop.call_later(SLOW, self._watch, due)

    def _stuck(self, now: float) -> bool:
        """No thread runs, or each running one has been on its current read for :data:`SLOW` (holding the lock)."""
        return not self._running or now - max(r.began for r in self._running) >= SLOW

    def _watch(self, due: float) -> None:
        """On the loop, every :data:`SLOW` while reads wait or answers are held: hand back the answers of a thread
        that has been on one read that long (they were ready before it), and wake another thread if every running
        one is stuck (with every client waiting, no later :meth:`submit` would come to do it)."""
        now = time.monotonic()
        held: list[Answer] = []
        with self._lock:
            if due != self._watch_due:
                return  # replaced by a later one
            self._watch_due = NOT_WATCHING
            for reader in self._running:
                if reader.answers and now - reader.began >= SLOW:
                    held += reader.answers
                    reader.answers = []
            if self._items and self._stuck(now):
                self._wake()
            if self._items or any(r.answers for r in self._running):
                self._watch_soon(asyncio.get_running_loop(), now)
        if held:
            settle(held)

    def _wake(self) -> None:
        """A parked thread to work, or a new one while there are fewer than the count (called holding the lock)."""
        if self._parked:
            reader = self._parked.pop()  # the last parked: its connection's pages are the warmest
            reader.began = time.monotonic()
            self._running.append(reader)
            reader.wake.release()
        elif len(self._threads) < self._count:
            reader = _Reader()  # running from the start: it takes the queued reads, then parks
            self._running.append(reader)
            thread = threading.Thread(target=self._serve, args=(reader,), name="chatlab-sqlite-reader", daemon=True)
            self._threads.append(thread)
            thread.start()
        # else all are running: the read waits for the first to finish

    def stop(self) -> None:
        """Finish the queued reads, end the threads and close their connections (a later read starts new ones)."""
        with self._lock:
            threads, self._threads = self._threads, []
            self._stopping = True
            self._running += self._parked  # each finds no read and ends
            for reader in self._parked:
                reader.wake.release()
            self._parked.clear()
        for thread in threads:
            thread.join()
        with self._lock:
            self._stopping = False

    def _serve(self, reader: _Reader) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while (item := self._next(reader)) is not None:
                work, loop, future, deadline = item
                reader.began = time.monotonic()
                try:
                    if reader.began >= deadline:
                        raise self._too_slow()
                    conn = conn or self._connect()
                    answer: Answer = (loop, future, work(conn), None)
                except (sqlite3.Error, OSError) as exc:
                    answer = (loop, future, None, self._failure(exc))
                    if conn is not None:
                        conn.close()
                        conn = None  # a fresh connection for the next read
                except BaseException as exc:  # the caller's to raise (as asyncio.to_thread would)
                    answer = (loop, future, None, exc)
                with self._lock:
                    reader.answers.append(answer)
                    full = reader.answers if len(reader.answers) >= BATCH else None
                    if full:
                        reader.answers = []
                if full:
                    settle(full)
        finally:
            if conn is not None:
                conn.close()

    def _next(self, reader: _Reader) -> _Item | None:
        """The next queued read; when there is none, hand back the held answers and park until woken (``None``:
        stop)."""
        while True:
            with self._lock:
                if self._items:
                    return self._items.popleft()
                answers, reader.answers = reader.answers, []
                self._running.remove(reader)
                stopping = self._stopping
                if not stopping:
                    self._parked.append(reader)
            if answers:
                settle(answers)
            if stopping:
                return None
            reader.wake.acquire()  # parked: a submit (or stop) releases it
