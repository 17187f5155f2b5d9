"""The database alone: the most operations per second a database store serves, without HTTP or the service.

The HTTP goals for the database stores are ratios to the bare Starlette ceiling, but on this
machine the database server, the load generator and the service share the same CPUs, so the
database's own work bounds what any service can reach. This measures that bound in the same
run as the ceiling pairs: the store object (chatlab's store code and its driver: the leanest
client that does exactly what the service asks the database) opened in the bench process, on
the event loop of the server stack, driven by as many asyncio tasks as the load generator has
connections, for the same time as a load run. The operations are the service's: ``read_array`` of the
20-message conversation the HTTP read load fetches (what its ``GET`` calls); ``append`` a 4-message batch with an
idempotency record of its own, durable as the store makes it (fsync'ed WAL, synchronous
commit, Redis as configured), to 64 conversations in turn. What the service adds on top
(HTTP, FastAPI, decoding and fingerprinting the body) is not done.

Beside the rate: the bench process's CPU time per operation, what chatlab's store code and the
Python driver cost (for SQLite the database's own work too: it runs in the process's threads).
One core at that cost serves at most ``1000 / ms`` operations a second, so where that is near the
rate, the Python client is the limit and the database could serve more. (CPU time, not the share
of a core: on a shared machine a busy process may get less than a core.) This is the bound of any
chatlab service on the store, not the database's own: with the store's read commands, pgbench and
redis-benchmark served 5-8 times the store alone's reads on the development machine.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .targets import StoreTarget
from .workload import APPEND_KEYS, READ_MESSAGES, append_body

READ_KEY = "bench-read"
"""The conversation of the HTTP read load (``READ_PATH``), which the service run filled."""
APPEND_PREFIX = "bench-alone-"
WARM_UP = 30


@dataclass
class AloneRun:
    """One run of the store alone: operations per second, and the bench process's CPU milliseconds per operation."""

    rps: float
    cpu_ms: float


class StoreAlone:
    """A database store opened in this process, on its own event loop between runs (a context manager)."""

    def __init__(self, target: StoreTarget, loop: str, concurrency: int) -> None:
        from ..service.settings import ServiceSettings
        from ..stores import open_store

        self.name = target.name
        self.concurrency = concurrency
        self._runner = asyncio.Runner(loop_factory=_loop_factory(loop))
        timeout = ServiceSettings.model_fields["store_timeout"].default  # what `chatlab serve` opens it with
        self.store = open_store(target.url, timeout=timeout)
        self._calls = {"read": self._read, "append": self._appender()}

    async def _read(self) -> None:
        await self.store.read_array(READ_KEY)  # what the service's GET calls

    def _appender(self) -> Callable[[], Awaitable[Any]]:
        """Appends of the append load's batch, each with an idempotency record of its own, as the service makes."""
        from ..service import schema
        from ..service.security.conditions import fingerprint
        from ..service.settings import ServiceSettings
        from ..stores.base import Idempotency

        messages = schema.decode_messages_body(append_body(), max_messages=100)
        digest = fingerprint("append", messages)
        ttl = ServiceSettings.model_fields["idempotency_ttl"].default
        run = uuid.uuid4().hex
        counter = itertools.count()

        def append() -> Awaitable[Any]:
            n = next(counter)
            idempotency = Idempotency(f"{run}-{n}", digest, ttl)
            return self.store.append(f"{APPEND_PREFIX}{n % APPEND_KEYS}", messages, idempotency=idempotency)

        return append

    def warm_up(self, op: str) -> None:
        """Open the connections and check the read is the service's (the same conversation, same size)."""
        self._runner.run(self._warm_up(op))

    async def _warm_up(self, op: str) -> None:
        await self._calls[op]()  # one first: the store checks its schema on first use
        await asyncio.gather(*(self._calls[op]() for _ in range(WARM_UP)))
        if op == "read" and len((await self.store.read(READ_KEY)).messages) != READ_MESSAGES:
            raise RuntimeError(f"the {self.name} store alone reads another conversation than the service")

    def run(self, op: str, seconds: float) -> AloneRun:
        """``concurrency`` tasks doing ``op`` one after another for ``seconds``."""
        return self._runner.run(self._drive(self._calls[op], seconds))

    async def _drive(self, call: Callable[[], Awaitable[Any]], seconds: float) -> AloneRun:
        done = 0
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal done
            while time.perf_counter() < deadline:
                await call()
                done += 1

        started, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(worker() for _ in range(self.concurrency)))
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        return AloneRun(done / elapsed, cpu * 1000 / done if done else float("nan"))

    def close(self) -> None:
        try:
            self._runner.run(self.store.close())
        finally:
            self._runner.close()

    def __enter__(self) -> StoreAlone:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _loop_factory(loop: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The server stack's event loop (uvloop on the fast stack), as the service runs on it."""
    if loop == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    return None
