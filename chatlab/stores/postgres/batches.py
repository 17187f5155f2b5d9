"""Group reads and group appends: the calls of one event loop that wait at one moment share one statement.

Most of what a short PostgreSQL operation costs is per statement, not per row: the driver's work in the service's
process, and the backend's parse, plan, and for a write its commit and WAL flush. A :class:`Batcher` queues the calls
of one event loop; its drainers (at most ``statements`` at once) take everything queued (at most ``max_batch``) and
run it as one statement. A lone call does not wait: when a drainer is free it starts at once (no timer).

A second statement starts only behind one that has run longer than statements usually take (twice the recent
average, measured as they run): until then the calls behind it wait and go together in the next, which keeps batches
large, while a long statement (a large conversation's read) does not hold up the calls behind it for long.

What each caller sees is what a statement of its own would give:

* one member's arguments that the database refuses make the statement fail having run nothing: the members then run
  again one at a time, so only that one fails, as alone (``alone`` tells such failures);
* any other failure fails every member, each with an exception of its own;
* deadlines: each call's is ``timeout()`` from when it called; a batch runs until its members' earliest, and a call
  whose deadline passes while it waits in the queue fails then, without running (one timer per batcher, armed while
  calls wait).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, NamedTuple, TypeVar

from ..base import StoreError

A = TypeVar("A")
R = TypeVar("R")

SMOOTHING = 0.125
"""Weight of the latest statement's duration in the running average (a common choice for such averages: TCP's)."""


class _Call(NamedTuple, Generic[A, R]):
    args: A
    future: asyncio.Future[R]
    deadline: float


class Batcher(Generic[A, R]):
    """Runs the calls of one event loop in batches: ``run(args, deadline)`` gives one outcome per member, in order.

    ``patience``: seconds a statement may run before calls queued behind it start another (``None``: twice the
    running average of the statements' durations)."""

    def __init__(
        self,
        run: Callable[[list[A], float], Awaitable[Sequence[R]]],
        *,
        timeout: Callable[[], float],
        late: Callable[[], BaseException],
        statements: int = 1,
        max_batch: int = 64,
        alone: Callable[[Exception], bool] = lambda exc: False,
        patience: float | None = None,
    ) -> None:
        if statements < 1 or max_batch < 1:
            raise ValueError(f"statements and max_batch must be 1 or more (got {statements} and {max_batch})")
        self._run = run
        self._timeout = timeout
        self._late = late
        self._statements = statements
        self._max_batch = max_batch
        self._alone = alone
        self._patience = patience
        self._average = 0.0  # of the statements' durations, in seconds
        self._queue: deque[_Call[A, R]] = deque()
        self._busy = 0
        self._starting: asyncio.Task[None] | None = None  # a drainer on its way: it takes what is queued by then
        self._drainers: set[asyncio.Task[None]] = set()  # referenced while they run
        self._timer: asyncio.TimerHandle | None = None  # while calls wait with every drainer busy
        self._began = 0.0  # when the latest batch's statement began
        self._recheck: asyncio.TimerHandle | None = None  # a look at the queue once that statement is slow
        self.statements = 0
        """Statements run (for tests and profiles)."""
        self.members = 0
        """Calls those statements answered."""

    def submit(self, args: A) -> asyncio.Future[R]:
        """Queue a call; its future holds its outcome once its batch's statement returned."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        now = time.monotonic()
        self._queue.append(_Call(args, future, now + self._timeout()))
        if not self._wake(loop) and self._timer is None:  # at most one armed: under load, one a timeout
            self._timer = loop.call_later(self._queue[0].deadline - now, self._expire)
        return future

    def _slow_after(self) -> float:
        return self._patience if self._patience is not None else 2 * self._average

    def _wake(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Start a drainer for what is queued, unless one is on its way or all are busy; whether one started."""
        if self._starting is not None or self._busy >= self._statements:
            return False
        if self._busy and (wait := self._began + self._slow_after() - time.monotonic()) > 0:
            if self._recheck is None:  # the running one should end soon
                self._recheck = loop.call_later(wait, self._look_again)
            return False
        self._busy += 1
        task = self._starting = loop.create_task(self._drain())
        self._drainers.add(task)
        task.add_done_callback(self._ended)
        return True

    def _look_again(self) -> None:
        """Once the latest statement is slow: another drainer for what still waits, if there is room (with every
        caller waiting, no later :meth:`submit` would come to start it)."""
        self._recheck = None
        if self._queue:
            self._wake(asyncio.get_running_loop())

    def _expire(self) -> None:
        """Answer the calls whose deadline passed in the queue (they ran nothing); wait again for the next deadline
        while calls are left waiting."""
        self._timer = None
        now = time.monotonic()
        waiting = [call for call in self._queue if not call.future.done()]
        for call in waiting:
            if call.deadline <= now:
                call.future.set_exception(self._late())
        self._queue = deque(call for call in waiting if call.deadline > now)
        if self._queue:
            deadline = min(call.deadline for call in self._queue)
            self._timer = asyncio.get_running_loop().call_later(deadline - now, self._expire)

    async def _drain(self) -> None:
        self._starting = None
        try:
            while self._queue:
                batch = self._take()
                if self._queue:  # more than a batch holds: another drainer, if there is room
                    self._wake(asyncio.get_running_loop())
                if batch:
                    await self._run_batch(batch)
        finally:
            self._busy -= 1  # at once: a call queued from now on starts a drainer of its own

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._drainers.discard(task)
        if task is self._starting:  # cancelled before it began: its body never ran
            self._starting = None
            self._busy -= 1
        if task.cancelled():  # the loop is ending: so are the callers
            while self._queue:
                self._queue.popleft().future.cancel()

    def _take(self) -> list[_Call[A, R]]:
        """The next batch: queued calls still waiting and within their deadlines (the others are answered now)."""
        now = time.monotonic()
        batch: list[_Call[A, R]] = []
        while self._queue and len(batch) < self._max_batch:
            call = self._queue.popleft()
            if call.future.done():  # the caller gave up (cancelled)
                continue
            if call.deadline <= now:
                call.future.set_exception(self._late())
                continue
            batch.append(call)
        return batch

    async def _run_batch(self, batch: list[_Call[A, R]]) -> None:
        began = self._began = time.monotonic()
        self.statements += 1
        self.members += len(batch)
        try:
            outcomes = await self._run([call.args for call in batch], min(call.deadline for call in batch))
        except asyncio.CancelledError:
            for call in batch:
                call.future.cancel()
            raise
        except Exception as exc:
            if len(batch) > 1 and self._alone(exc):  # one member's doing, nothing run: each runs alone
                for call in batch:
                    if call.future.done():  # the caller gave up meanwhile
                        continue
                    if call.deadline > time.monotonic():
                        await self._run_batch([call])
                    else:
                        call.future.set_exception(self._late())
                return
            for call in batch:
                if not call.future.done():
                    call.future.set_exception(_copy(exc))
            return
        self._average += SMOOTHING * (time.monotonic() - began - self._average)
        for call, outcome in zip(batch, outcomes, strict=True):
            if not call.future.done():
                call.future.set_result(outcome)


def _copy(exc: Exception) -> Exception:
    """An exception of its own for each member (one instance raised in many tasks would gather their tracebacks)."""
    if not isinstance(exc, StoreError):
        return exc
    copy = StoreError(*exc.args)
    copy.__cause__ = exc.__cause__
    return copy
