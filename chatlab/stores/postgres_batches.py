"""Group reads and group appends for PostgreSQL: the operations waiting at one moment share one statement.

Most of what a short PostgreSQL operation costs is per statement, not per row: psycopg's protocol handling in
the service's process (~80 µs of client CPU per read, ~150 µs per append) and the backend's parse, plan, and for a
write its commit and WAL flush, on a machine whose CPUs the service shares. A :class:`Batcher` queues the calls of
one event loop; its drainers (at most :data:`READ_INFLIGHT` read and :data:`APPEND_INFLIGHT` append statements at
once; a second read statement only behind one that has run :data:`SLOW` seconds) take everything queued (at most
:data:`MAX_BATCH`) and run it as one statement: reads as one ``SELECT`` over
the array of keys, appends as one call of the batch append function, one transaction. A lone call does not wait:
when a drainer is free it starts at once (no timer); a batch of one runs the single operation's statement.

What each caller sees is what the single operation gives:

* Reads: one statement, one snapshot, taken after every member's call began: each member reads a state at least
  as new as when it called, its messages and version from one moment.
* Appends: one call of the batch append function (:mod:`chatlab.stores.postgres_append_sql`), which decides each
  member by the single append's rules (If-Match, idempotency), so a refusal is its member's alone; members to one
  conversation in arrival order; a batch of one calls the single append's function (cheaper for one). A member is
  answered only after the statement returned, committed (autocommit: one implicit transaction); a failure of the
  database fails every member, and nothing of the batch is written.
* One member's arguments that the database refuses (a key with a NUL character) fail that member alone: the
  statement failed having written nothing, so the members run again one at a time.
* Deadlines: each call's is the store's ``timeout`` from when it called; a batch ends by its members' earliest (the
  connection's socket shut down then), and a call whose deadline passes while it waits in the queue fails then,
  without running (one timer per batcher, armed while calls wait).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .base import StoreError
from .postgres_connections import Connection, store_error
from .postgres_raw import fetch, read_parameters, read_rows
from .postgres_raw_append import AppendRow, append_batch_parameters, append_batch_rows, append_parameters, append_row

if TYPE_CHECKING:
    from .postgres import PostgresChatHistoryStore

A = TypeVar("A")

READ_INFLIGHT = 2
"""At most this many read statements at once per event loop: a long read (a large conversation) does not hold up the
others; the second starts only once the first has run :data:`SLOW` seconds."""
APPEND_INFLIGHT = 1
"""At most this many append statements at once per event loop: the next batch gathers while one commits. Over HTTP
(16 connections, 2 CPUs shared with the database) 1 served ~20% more appends than 2 or 4 (batches of 8 members
against 6, ~120 against ~140 µs of the service's CPU and ~135 against ~160 of the backend's per append); a batch
waiting for a conversation's lock (a replace, the sweep) holds the others up, each still within its timeout."""
SLOW = 0.002
"""Seconds the latest batch's statement may run before calls queued behind it start another drainer (up to the
in-flight limit): until then they wait for it and go together. Starting a second read statement at once made the
batches half as large (2-CPU machine with ~25 µs thread wake-ups: GET load over HTTP ~5,300-7,000 reads/s with two
at once, ~6,300-8,000 with one); a long read (a large conversation) still does not hold up the others past this."""
MAX_BATCH = 64
"""At most this many calls share a statement (bounds its size and how long an append batch holds its locks)."""

ReadArgs = tuple[str, int, "int | None"]
"""A read's conversation key, first position and most messages (``None``: all)."""
ReadRow = tuple[int, str, Sequence[Any]] | None
"""A read's message count, version and messages (``bytea`` buffers); ``None`` when the conversation does not exist."""
AppendArgs = tuple[Any, ...]
"""The single append statement's parameters (see ``postgres_sql.APPEND_STATEMENT``)."""

_Item = tuple[A, "asyncio.Future[Any]", float]


class Batcher(Generic[A]):
    """Runs calls of one event loop in batches: ``run(args, deadline)`` gives one outcome per member, in order;
    each call's deadline is ``timeout()`` seconds from when it is submitted. A batch that fails with an error
    ``alone(error)`` blames on one member's arguments (the statement refused, nothing of it done) runs again one
    member at a time, so that member fails as it would have alone and the others go on."""

    def __init__(
        self,
        run: Callable[[list[A], float], Awaitable[Sequence[Any]]],
        timeout: Callable[[], float],
        late: Callable[[], BaseException],
        inflight: int = 1,
        alone: Callable[[Exception], bool] = lambda exc: False,
    ) -> None:
        self._run = run
        self._alone = alone
        self._timeout = timeout
        self._late = late
        self._inflight = inflight
        self._queue: deque[_Item[A]] = deque()
        self._busy = 0
        self._starting: asyncio.Task[None] | None = None  # a drainer on its way: it takes what is queued by then
        self._drainers: set[asyncio.Task[None]] = set()  # referenced while they run
        self._timer: asyncio.TimerHandle | None = None  # while calls wait with every drainer busy
        self._began = 0.0  # when the latest batch's statement began
        self._recheck: asyncio.TimerHandle | None = None  # a look at the queue once that statement is SLOW
        self.statements = self.members = 0  # batches run, and the calls they answered (for tests and profiles)

    def submit(self, args: A) -> asyncio.Future[Any]:
        """Queue a call; its future holds its outcome once its batch's statement returned."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        now = time.monotonic()
        self._queue.append((args, future, now + self._timeout()))
        if not self._wake(loop) and self._timer is None:  # at most one armed: under load, one a timeout
            self._timer = loop.call_later(self._queue[0][2] - now, self._expire)
        return future

    def _wake(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Start a drainer for what is queued, unless one is on its way or all are busy; whether one started."""
        if self._starting is not None or self._busy >= self._inflight:
            return False
        if self._busy and (wait := self._began + SLOW - time.monotonic()) > 0:  # the running one should end soon
            if self._recheck is None:
                self._recheck = loop.call_later(wait, self._look_again)
            return False
        self._busy += 1
        task = self._starting = loop.create_task(self._drain())
        self._drainers.add(task)
        task.add_done_callback(self._ended)
        return True

    def _look_again(self) -> None:
        """:data:`SLOW` after the latest statement began: another drainer for what still waits, if there is room
        (with every caller waiting, no later :meth:`submit` would come to start it)."""
        self._recheck = None
        if self._queue:
            self._wake(asyncio.get_running_loop())

    def _expire(self) -> None:
        """Answer the calls whose deadline passed in the queue (the store's error of a wait for a connection:
        they ran nothing); wait again for the next deadline while calls are left waiting."""
        self._timer = None
        now = time.monotonic()
        waiting = [item for item in self._queue if not item[1].done()]
        for item in waiting:
            if item[2] <= now:
                item[1].set_exception(self._late())
        self._queue = deque(item for item in waiting if item[2] > now)
        if self._queue:
            deadline = min(item[2] for item in self._queue)
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
                self._queue.popleft()[1].cancel()

    def _take(self) -> list[_Item[A]]:
        """The next batch: queued calls still waiting and within their deadlines (the others are answered now)."""
        now = time.monotonic()
        batch: list[_Item[A]] = []
        while self._queue and len(batch) < MAX_BATCH:
            item = self._queue.popleft()
            if item[1].done():  # the caller gave up (cancelled)
                continue
            if item[2] <= now:
                item[1].set_exception(self._late())
                continue
            batch.append(item)
        return batch

    async def _run_batch(self, batch: list[_Item[A]]) -> None:
        self._began = time.monotonic()
        self.statements += 1
        self.members += len(batch)
        try:
            outcomes = await self._run([item[0] for item in batch], min(item[2] for item in batch))
        except asyncio.CancelledError:
            for item in batch:
                item[1].cancel()
            raise
        except Exception as exc:
            if len(batch) > 1 and self._alone(exc):  # one member's doing, nothing written: each runs alone
                for item in batch:
                    if item[1].done():  # the caller gave up meanwhile
                        continue
                    if item[2] > time.monotonic():
                        await self._run_batch([item])
                    else:
                        item[1].set_exception(self._late())
                return
            for item in batch:
                if not item[1].done():
                    item[1].set_exception(_copy(exc))
            return
        for item, outcome in zip(batch, outcomes, strict=True):
            if not item[1].done():
                item[1].set_result(outcome)


def _copy(exc: Exception) -> Exception:
    """An exception of its own for each member (one instance raised in many tasks would gather their tracebacks)."""
    if not isinstance(exc, StoreError):
        return exc
    copy = StoreError(*exc.args)
    copy.__cause__ = exc.__cause__
    return copy


class Batches:
    """The store's batchers of one event loop."""

    def __init__(self, store: PostgresChatHistoryStore) -> None:
        self._store = store
        reads = max(1, min(READ_INFLIGHT, store.max_size))

        def late() -> StoreError:
            from psycopg_pool import PoolTimeout

            return store_error(store, PoolTimeout(f"no connection available within {store.timeout:g} s"))

        def timeout() -> float:
            return store.timeout

        self.reads: Batcher[ReadArgs] = Batcher(self._read, timeout, late, reads, _one_member_s)
        self.appends: Batcher[AppendArgs] = Batcher(self._append, timeout, late, APPEND_INFLIGHT, _one_member_s)

    async def _read(self, members: list[ReadArgs], deadline: float) -> list[ReadRow]:
        async with Connection(self._store, deadline) as conn:  # a key it refuses fails here, as StoreError
            parameters = read_parameters(members, conn.info.encoding)
            return read_rows(conn, await fetch(conn, self._store._queries["read_many"], parameters))

    async def _append(self, members: list[AppendArgs], deadline: float) -> list[AppendRow]:
        q = self._store._queries
        if len(members) > 1 and not self._store._append_batch:
            raise OneAtATime
        async with Connection(self._store, deadline) as conn:  # arguments it refuses fail here, as StoreError
            encoding = conn.info.encoding
            if len(members) == 1:  # the single append's function: a batch of one costs the backend ~70 µs more
                return [append_row(await fetch(conn, q["append"], append_parameters(members[0], encoding)), encoding)]
            if self._store._append_batch:  # else found missing by this connection's first look at the schema
                parameters = append_batch_parameters(members, encoding)
                return append_batch_rows(await fetch(conn, q["append_batch"], parameters), encoding, len(members))
        raise OneAtATime


class OneAtATime(Exception):
    """The batch must run one member at a time (the batch append's function is missing and may not be created)."""


def _one_member_s(exc: Exception) -> bool:
    """Whether a batch's failure is a member's arguments refused (a key with a NUL character, a position past
    ``bigint``; psycopg's dump, or the server before it ran anything): no round trip lost, nothing written. Or
    :class:`OneAtATime`, raised before anything ran."""
    import psycopg

    return isinstance(exc, OneAtATime) or isinstance(
        exc.__cause__, psycopg.DataError | psycopg.errors.ProgramLimitExceeded
    )


def batches_of(store: PostgresChatHistoryStore) -> Batches:
    """The store's batchers for the running event loop (made on first use there)."""
    loop = asyncio.get_running_loop()
    batches = store._batches.get(loop)
    if batches is None:
        for closed in [other for other in store._batches if other.is_closed()]:
            del store._batches[closed]
        batches = store._batches[loop] = Batches(store)
    return batches
