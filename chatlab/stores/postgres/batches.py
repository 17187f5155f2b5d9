"""Group reads and group appends: most of a short PostgreSQL operation's cost is per statement (the driver's work,
parse and plan, a write's commit), so the calls of one event loop waiting at one moment share one, run by their
earliest deadline. Each caller sees what a statement of its own would give: a member whose arguments the database
refuses fails alone, any other failure fails them all, and a call still queued at its deadline fails without running."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, NamedTuple, TypeVar

from ..base import StoreError
from .connections import Connections

A = TypeVar("A")
R = TypeVar("R")


class _Call(NamedTuple, Generic[A, R]):
    args: A
    future: asyncio.Future[R]
    deadline: float
    expiry: asyncio.TimerHandle  # fails the call if it is still queued at its deadline


class Batcher(Generic[A, R]):
    """Up to ``statements`` drainers each run the queued calls (at most ``max_batch``) as one ``run(args, deadline)``,
    one outcome per member in order; a lone call starts at once when a drainer is free."""

    def __init__(
        self,
        run: Callable[[list[A], float], Awaitable[Sequence[R]]],
        connections: Connections,  # its timeout and its error for a call with no connection in time
        statements: int = 1,
        max_batch: int = 64,
    ) -> None:
        if statements < 1 or max_batch < 1:
            raise ValueError(f"statements and max_batch must be 1 or more (got {statements} and {max_batch})")
        self._run = run
        self._connections = connections
        self._statements = statements
        self._max_batch = max_batch
        self._queue: deque[_Call[A, R]] = deque()
        self._busy = 0  # drainers running
        self._drainers: set[asyncio.Task[None]] = set()  # referenced while they run
        self.statements = 0  # statements run, and the calls they answered (for tests and profiles)
        self.members = 0

    def submit(self, args: A) -> asyncio.Future[R]:
        """Queue one call; its outcome, when a statement answered it (or its deadline passed)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        timeout = self._connections.timeout()
        expiry = loop.call_later(timeout, self._expire, future)
        self._queue.append(_Call(args, future, time.monotonic() + timeout, expiry))
        if self._busy < self._statements:
            self._busy += 1
            task = loop.create_task(self._drain())
            self._drainers.add(task)
            task.add_done_callback(self._drainers.discard)
        return future

    def _expire(self, future: asyncio.Future[R]) -> None:
        if not future.done():
            future.set_exception(self._connections.error(None))

    async def _drain(self) -> None:
        try:
            while batch := self._take():
                await self._run_batch(batch)
        finally:
            self._busy -= 1  # at once: a call queued from now on starts a drainer of its own

    def _take(self) -> list[_Call[A, R]]:
        now = time.monotonic()
        batch: list[_Call[A, R]] = []
        while self._queue and len(batch) < self._max_batch:
            call = self._queue.popleft()
            call.expiry.cancel()
            if call.deadline <= now:
                self._expire(call.future)
            elif not call.future.done():  # unless the caller gave up
                batch.append(call)
        return batch

    async def _run_batch(self, batch: list[_Call[A, R]]) -> None:
        self.statements += 1
        self.members += len(batch)
        try:
            outcomes = await self._run([call.args for call in batch], min(call.deadline for call in batch))
        except asyncio.CancelledError:
            for call in batch:
                call.future.cancel()
            raise
        except Exception as exc:
            if len(batch) > 1 and _refused_alone(exc):  # nothing ran: each member runs alone, by its deadline
                for call in batch:
                    if not call.future.done():  # unless its caller gave up meanwhile
                        await self._run_batch([call])
                return
            for call in batch:
                if not call.future.done():
                    call.future.set_exception(_copy(exc))
            return
        for call, outcome in zip(batch, outcomes, strict=True):
            if not call.future.done():
                call.future.set_result(outcome)


def _refused_alone(exc: Exception) -> bool:
    """Whether a batch failed on one member's arguments, refused by asyncpg or the server before anything ran."""
    import asyncpg

    cause = exc.__cause__ if isinstance(exc, StoreError) else exc
    return isinstance(cause, asyncpg.DataError | asyncpg.ProgramLimitExceededError) or (
        isinstance(cause, asyncpg.InterfaceError) and isinstance(cause, ValueError)  # an argument asyncpg cannot send
    )


def _copy(exc: Exception) -> Exception:
    """An exception of its own for each member (one instance raised in many tasks would gather their tracebacks)."""
    if not isinstance(exc, StoreError):
        return exc
    copy = StoreError(*exc.args)
    copy.__cause__ = exc.__cause__
    return copy
