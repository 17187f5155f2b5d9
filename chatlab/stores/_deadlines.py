"""A deadline on each of many operations, with one timer for all of them instead of one each.

``asyncio.timeout`` starts and cancels a timer per operation, a good part of a short store operation's cost. A store's
operations share one timeout, so their deadlines come in start order: one timer, set for the oldest running
operation, cancels whatever is due and is set again for the next. An operation sees what ``asyncio.timeout`` gives:
``TimeoutError`` at its deadline (a cancellation from elsewhere stays one).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

R = TypeVar("R")


class Deadlines:
    """Runs awaitables of the running event loop, each cancelled ``timeout`` seconds after it starts."""

    def __init__(self, timeout: float) -> None:
        self._timeout = timeout
        self._loop = asyncio.get_running_loop()
        self._count = 0
        self._running: dict[int, tuple[float, asyncio.Task[Any], int]] = {}  # in start order: in deadline order
        self._expired: dict[int, int] = {}  # cancelled here -> the task's cancellation count before
        self._timer: asyncio.TimerHandle | None = None

    async def run(self, work: Awaitable[R]) -> R:
        """``await work``, or TimeoutError when it has not ended within the timeout."""
        task = asyncio.current_task()
        if task is None:  # pragma: no cover - an awaiting coroutine always runs in a task
            raise RuntimeError("Deadlines.run needs a task")
        self._count += 1
        key = self._count
        deadline = self._loop.time() + self._timeout
        self._running[key] = deadline, task, task.cancelling()
        if self._timer is None:
            self._timer = self._loop.call_at(deadline, self._expire)
        try:
            result = await work
        except asyncio.CancelledError as exc:
            if self._end(key, task):
                raise TimeoutError from exc
            raise
        except BaseException:
            self._end(key, task)
            raise
        self._end(key, task)
        return result

    def _end(self, key: int, task: asyncio.Task[Any]) -> bool:
        """Forget an operation; whether it was cancelled here only (so its cancellation is a timeout)."""
        if self._running.pop(key, None) is not None:
            return False
        return task.uncancel() <= self._expired.pop(key)

    def _expire(self) -> None:
        self._timer = None
        now = self._loop.time()
        for key, (deadline, task, cancelling) in list(self._running.items()):
            if deadline > now:
                self._timer = self._loop.call_at(deadline, self._expire)
                return
            del self._running[key]
            self._expired[key] = cancelling
            task.cancel()
