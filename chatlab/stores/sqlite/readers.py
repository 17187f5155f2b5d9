"""The SQLite store's reader threads, each with a connection of its own (its statements stay prepared).

Reads wait in one queue, which the threads take from in turn. A read that finds more reads queued than threads
waiting starts another thread, up to ``threads``: sequential reads keep to one thread, and a long read does not
hold up the reads behind it.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from .answers import Answer, settle

T = TypeVar("T")

Read = tuple[Callable[[sqlite3.Connection], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]", float]


class Readers:
    """Up to ``threads`` reader threads (``None``: as many as asyncio's default executor would have). ``failure``
    turns a database error into the caller's exception; ``too_slow`` is that of a read that waited past its deadline.
    """

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        failure: Callable[[BaseException], BaseException],
        too_slow: Callable[[], BaseException],
        threads: int | None,
    ) -> None:
        self._connect = connect
        self._failure = failure
        self._too_slow = too_slow
        self._count = threads if threads is not None else min(32, (os.cpu_count() or 1) + 4)
        self._ready = threading.Condition()  # guards the three below; notified when a read is queued
        self._reads: deque[Read | None] = deque()  # ``None``: a thread is to stop
        self._threads: list[threading.Thread] = []
        self._waiting = 0  # threads waiting for a read

    @property
    def started(self) -> int:
        with self._ready:
            return len(self._threads)

    async def submit(self, work: Callable[[sqlite3.Connection], T], deadline: float) -> T:
        """Run ``work`` on a reader thread's connection unless ``deadline`` passes before a thread takes it."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._ready:
            self._reads.append((work, loop, future, deadline))
            self._ready.notify()
            if len(self._reads) > self._waiting and len(self._threads) < self._count:
                thread = threading.Thread(target=self._serve, name="chatlab-sqlite-reader", daemon=True)
                self._threads.append(thread)
                thread.start()
        return await future

    def stop(self) -> None:
        """Finish the queued reads, end the threads and close their connections (a later read starts new ones)."""
        with self._ready:
            threads, self._threads = self._threads, []
            self._reads += [None] * len(threads)  # each thread ends at the first it takes
            self._ready.notify_all()
        for thread in threads:
            thread.join()

    def _serve(self) -> None:
        conn: sqlite3.Connection | None = None
        answer: Answer | None = None
        try:
            while (read := self._next(answer)) is not None:
                work, loop, future, deadline = read
                try:
                    if time.monotonic() >= deadline:
                        raise self._too_slow()
                    conn = conn or self._connect()
                    answer = (loop, future, work(conn), None)
                except (sqlite3.Error, OSError) as exc:
                    answer = (loop, future, None, self._failure(exc))
                    if conn is not None:
                        conn.close()
                        conn = None  # a fresh connection for the next read
                except BaseException as exc:  # the caller's to raise (as asyncio.to_thread would)
                    answer = (loop, future, None, exc)
        finally:
            if conn is not None:
                conn.close()

    def _next(self, answer: Answer | None) -> Read | None:
        """Hand back the previous read's ``answer`` and wait for the next read (``None``: stop). The thread counts
        as waiting before the answer goes back, so that the read its caller sends next does not start another."""
        with self._ready:
            self._waiting += 1
        if answer is not None:
            settle([answer])
        with self._ready:
            while not self._reads:
                self._ready.wait()
            self._waiting -= 1
            return self._reads.popleft()
