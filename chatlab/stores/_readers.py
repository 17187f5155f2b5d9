"""Reader threads for SQLite: each keeps its own connection, and answers the event loop once per batch.

``asyncio.to_thread`` costs the loop more than a small read itself: a context copy, an executor work item, a
concurrent future chained to an asyncio one, and one wake-up of the loop per read. Here a read is a tuple on a
queue; a thread runs the reads waiting there one after another on its connection (its statements stay
prepared) and hands back all their answers in one ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ._group_commit import Answer, settle

T = TypeVar("T")

Work = Callable[[sqlite3.Connection], Any]
_Item = tuple[Work, asyncio.AbstractEventLoop, "asyncio.Future[Any]", float]

BATCH = 16
"""At most this many answers wait for a thread's next hand-back (a thread runs reads while more are queued)."""


class Readers:
    """``threads`` reader threads, started on first use; :meth:`submit` runs a read in one of them.

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
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    async def submit(self, work: Callable[[sqlite3.Connection], T], deadline: float) -> T:
        """Run ``work`` on a reader thread's connection unless ``deadline`` passes before a thread takes it."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        if len(self._threads) < self._count:
            self._start()
        self._queue.put((work, loop, future, deadline))
        return await future

    def _start(self) -> None:
        with self._lock:
            while len(self._threads) < self._count:
                thread = threading.Thread(target=self._serve, name="chatlab-sqlite-reader", daemon=True)
                thread.start()
                self._threads.append(thread)

    def stop(self) -> None:
        """Finish the queued reads, end the threads and close their connections (a later read starts new ones)."""
        with self._lock:
            threads, self._threads = self._threads, []
        for _ in threads:
            self._queue.put(None)
        for thread in threads:
            thread.join()

    def _serve(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while (item := self._queue.get()) is not None:
                answers: list[Answer] = []
                while item is not None:  # and the reads queued meanwhile, up to BATCH: one hand-back
                    work, loop, future, deadline = item
                    try:
                        if time.monotonic() >= deadline:
                            raise self._too_slow()
                        conn = conn or self._connect()
                        answers.append((loop, future, work(conn), None))
                    except (sqlite3.Error, OSError) as exc:
                        answers.append((loop, future, None, self._failure(exc)))
                        if conn is not None:
                            conn.close()
                            conn = None  # a fresh connection for the next read
                    except BaseException as exc:  # the caller's to raise (as asyncio.to_thread would)
                        answers.append((loop, future, None, exc))
                    item = self._queued() if len(answers) < BATCH else None
                settle(answers)
        finally:
            if conn is not None:
                conn.close()

    def _queued(self) -> _Item | None:
        """The next read if one is queued now (``None``: none, or the end: left for the outer loop)."""
        try:
            item = self._queue.get_nowait()
        except queue.Empty:
            return None
        if item is None:
            self._queue.put(None)
        return item
