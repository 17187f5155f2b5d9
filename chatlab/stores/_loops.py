"""One async resource (a connection pool, a client) per event loop, opened on first use: async drivers tie
connections to the loop that opened them, but a store may be created in a notebook's loop and used in a background
uvicorn thread's."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Generic, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)


class PerLoop(Generic[T]):
    """One resource per event loop: ``opener`` makes it on the loop's first :meth:`get`, ``closer`` ends it."""

    def __init__(self, opener: Callable[[], Coroutine[Any, Any, T]], closer: Callable[[T], Awaitable[None]]) -> None:
        self._opener = opener
        self._closer = closer
        self._lock = threading.Lock()
        self._tasks: dict[asyncio.AbstractEventLoop, asyncio.Task[T]] = {}
        self._opened: dict[asyncio.AbstractEventLoop, T] = {}  # the fast path: no lock, no shield

    async def get(self) -> T:
        """The resource of the running loop, opened now if needed (concurrent callers share one opening)."""
        loop = asyncio.get_running_loop()
        resource = self._opened.get(loop)
        if resource is not None:
            return resource
        with self._lock:
            for other in [other for other in self._tasks if other.is_closed()]:
                del self._tasks[other]  # a loop that ended (a finished asyncio.run): nothing left to close
                self._opened.pop(other, None)
            if loop not in self._tasks:
                self._tasks[loop] = loop.create_task(self._opener())
            task = self._tasks[loop]
        try:
            resource = await asyncio.shield(task)
        except BaseException:
            if task.done() and (task.cancelled() or task.exception() is not None):
                with self._lock:  # a failed opening is retried by the next call
                    if self._tasks.get(loop) is task:
                        del self._tasks[loop]
            raise
        with self._lock:
            if self._tasks.get(loop) is task:  # not closed meanwhile
                self._opened[loop] = resource
        return resource

    async def close(self, timeout: float = 10.0) -> None:
        """Close every instance (each in its own loop); a later call opens a new one, as a restarted service expects."""
        with self._lock:
            tasks, self._tasks, self._opened = self._tasks, {}, {}
        current = asyncio.get_running_loop()
        for loop, task in tasks.items():
            try:
                if loop is current:
                    await self._close_task(task)
                elif loop.is_running() and not loop.is_closed():
                    fut = asyncio.run_coroutine_threadsafe(self._close_task(task), loop)
                    await asyncio.wait_for(asyncio.wrap_future(fut), timeout)
                # a loop that is stopped or closed can run nothing: its connections go with it
            except Exception as exc:  # closing is best effort
                log.debug("closing a store resource failed: %r", exc)

    async def _close_task(self, task: asyncio.Task[T]) -> None:
        await self._closer(await task)
