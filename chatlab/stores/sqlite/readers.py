"""The SQLite store's reader threads, each with its own connection (its statements stay prepared).

A thread runs the queued reads in turn and hands its finished answers back together when the queue runs dry or after
holding them ``patience`` seconds. Another thread wakes (or starts, up to ``threads``) only when none runs or each
running one has been on its read for ``patience`` (a woken thread would queue for the GIL behind the event loop), so
a long read holds up neither the reads behind it nor the answers finished before it."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from .answers import Answer, settle

T = TypeVar("T")

_Item = tuple[Callable[[sqlite3.Connection], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]", float]

NOT_WATCHING = -float("inf")  # the due time while no :meth:`Readers._watch` is scheduled


class _Reader:
    """A thread's held answers and since when, when its current read began, and the lock it waits on while parked."""

    __slots__ = ("answers", "began", "held_since", "wake")

    def __init__(self) -> None:
        self.answers: list[Answer] = []
        self.began = self.held_since = time.monotonic()
        self.wake = threading.Lock()
        self.wake.acquire()


class Readers:
    """``failure``: a database error as the caller's exception; ``too_slow``: that of a read past its deadline."""

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        failure: Callable[[BaseException], BaseException],
        too_slow: Callable[[], BaseException],
        threads: int,
        patience: float,
    ) -> None:
        if threads < 1 or patience <= 0:
            raise ValueError(f"reader threads must be 1 or more and patience above 0 (got {threads}, {patience})")
        self._connect = connect
        self._failure = failure
        self._too_slow = too_slow
        self._count = threads
        self._patience = patience
        self._lock = threading.Lock()  # guards everything below and the readers' answers
        self._items: deque[_Item] = deque()
        self._running: list[_Reader] = []
        self._parked: list[_Reader] = []
        self._threads: list[threading.Thread] = []
        self._stopping = False
        self._watch_due = NOT_WATCHING  # when the scheduled :meth:`_watch` should run

    async def submit(self, work: Callable[[sqlite3.Connection], T], deadline: float) -> T:
        """Run ``work`` on a reader thread's connection unless ``deadline`` passes first."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._lock:
            self._items.append((work, loop, future, deadline))
            now = time.monotonic()
            if self._stuck(now):
                self._wake()
            if now > self._watch_due + self._patience:  # none scheduled, or lost with a loop that closed
                self._watch_soon(loop, now)
        return await future

    def _watch_soon(self, loop: asyncio.AbstractEventLoop, now: float) -> None:  # holding the lock
        self._watch_due = due = now + self._patience
        loop.call_later(self._patience, self._watch, due)

    def _stuck(self, now: float) -> bool:  # holding the lock
        return not self._running or now - max(r.began for r in self._running) >= self._patience

    def _watch(self, due: float) -> None:
        """Every ``patience`` while reads wait or answers are held: hand back the answers of threads stuck on a read,
        and wake another thread if all are stuck (no later :meth:`submit` may come to)."""
        now = time.monotonic()
        held: list[Answer] = []
        with self._lock:
            if due != self._watch_due:
                return  # replaced by a later one
            self._watch_due = NOT_WATCHING
            for reader in self._running:
                if reader.answers and now - reader.began >= self._patience:
                    held += reader.answers
                    reader.answers = []
            if self._items and self._stuck(now):
                self._wake()
            if self._items or any(r.answers for r in self._running):
                self._watch_soon(asyncio.get_running_loop(), now)
        settle(held)

    def _wake(self) -> None:  # holding the lock
        if self._parked:
            reader = self._parked.pop()  # the last parked: its connection's pages are the warmest
            reader.began = time.monotonic()
            self._running.append(reader)
            reader.wake.release()
        elif len(self._threads) < self._count:  # else all run: the read waits for the first to finish
            reader = _Reader()  # running from the start: it takes the queued reads, then parks
            self._running.append(reader)
            thread = threading.Thread(target=self._serve, args=(reader,), name="chatlab-sqlite-reader", daemon=True)
            self._threads.append(thread)
            thread.start()

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
                    now = time.monotonic()
                    if not reader.answers:
                        reader.held_since = now
                    reader.answers.append(answer)
                    due = None
                    if self._items and now - reader.held_since >= self._patience:  # else parking hands them back
                        due, reader.answers = reader.answers, []
                if due:
                    settle(due)
        finally:
            if conn is not None:
                conn.close()

    def _next(self, reader: _Reader) -> _Item | None:
        """The next read, or (none queued) hand back the held answers while still running (the reads their callers
        send next find it) and park until woken (``None``: stop)."""
        while True:
            with self._lock:
                if self._items:
                    return self._items.popleft()
                answers, reader.answers = reader.answers, []
                reader.began = time.monotonic()  # between reads, not stuck on one
            settle(answers)
            with self._lock:
                if self._items:
                    return self._items.popleft()
                self._running.remove(reader)
                stopping = self._stopping
                if not stopping:
                    self._parked.append(reader)
            if stopping:
                return None
            reader.wake.acquire()  # parked: a submit (or stop) releases it
