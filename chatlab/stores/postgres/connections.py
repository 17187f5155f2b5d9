"""An asyncpg pool per event loop, and a deadline on every operation, the wait for a connection included: at the
deadline the connection is terminated (its socket closed, nothing awaited), so whatever waits on it fails at once, even
when the server or the network stops answering. Driver errors become :class:`~chatlab.stores.base.StoreError`."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import _urls as urls
from .._loops import PerLoop
from .._urls import split_url
from ..base import IdempotencyKeyReused, MetadataChanged, StoreError, VersionMismatch
from ..metadata import MetadataError

if TYPE_CHECKING:
    from asyncpg import Pool
    from asyncpg.pool import PoolConnectionProxy

log = logging.getLogger(__name__)

CHATLAB_PARAMETERS = ("schema",)  # query parameters of a store URL that chatlab reads itself (not for the driver)
ANSWERS = (StoreError, VersionMismatch, IdempotencyKeyReused, MetadataChanged, MetadataError)  # answers, not failures


def redacted(url: str) -> str:
    """host:port/database of a PostgreSQL URL, without user or password, for messages and ``GET /``."""
    return urls.redacted(url, default_port=5432, default_database="(default database)")


async def _keep(conn: object) -> None:
    """No reset when a connection goes back to the pool (asyncpg's costs a round trip): operations change no setting."""


@dataclass(repr=False)  # conninfo may hold a password
class Connections:
    """The pools and deadlines. libpq's ``connect_timeout`` is read here: asyncpg would send it as a server setting."""

    conninfo: str
    timeout: Callable[[], float]  # the store's: seconds each operation may take, from the call to the answer
    min_size: int
    max_size: int
    statement_timeout: float | None
    prepare: Callable[[PoolConnectionProxy], Awaitable[None]]  # run on each connection before its operation

    def __post_init__(self) -> None:
        self.dsn, libpq = split_url(self.conninfo, ("connect_timeout",))
        given = libpq.get("connect_timeout")
        self.connect_timeout = float(given) if given and float(given) > 0 else max(2.0, self.timeout())
        self.where = redacted(self.conninfo)
        self._pools: PerLoop[Pool] = PerLoop(self._open, self._close)

    async def close(self) -> None:
        """Close every event loop's pool."""
        await self._pools.close()

    def error(self, exc: BaseException | None, *, expired: bool = False, connecting: bool = False) -> StoreError:
        """A driver's error as the store's (``None``: no connection in time)."""
        import asyncpg

        if expired:
            message = f"PostgreSQL at {self.where} did not answer within {self.timeout():g} s (the store timeout)"
        elif exc is None or (connecting and isinstance(exc, TimeoutError)):
            message = f"PostgreSQL at {self.where} is unreachable: no connection within {self.timeout():g} s"
        elif connecting and isinstance(exc, OSError | asyncpg.PostgresConnectionError):
            message = f"PostgreSQL at {self.where} is unreachable: {exc}".strip()
        elif isinstance(exc, asyncpg.QueryCanceledError):
            message = f"PostgreSQL at {self.where} timed out: {exc}".strip()
        elif isinstance(exc, asyncpg.PostgresError | asyncpg.InterfaceError | OSError | TimeoutError):
            message = f"PostgreSQL at {self.where} failed: {exc}".strip()
        else:
            message = f"PostgreSQL store {self.where} failed: {exc!r}"
        log.warning("%s", message)
        return StoreError(message)

    async def _open(self) -> Pool:
        import asyncpg

        timeout = self.statement_timeout
        server_settings = {} if timeout is None else {"statement_timeout": str(int(timeout * 1000))}
        return await asyncpg.create_pool(
            self.dsn,
            min_size=self.min_size,
            max_size=self.max_size,
            timeout=self.connect_timeout,
            server_settings=server_settings,
            reset=_keep,
        )

    async def _close(self, pool: Pool) -> None:
        try:
            await asyncio.wait_for(pool.close(), self.timeout())
        except TimeoutError:
            pool.terminate()

    @asynccontextmanager
    async def acquire(self, deadline: float | None = None) -> AsyncIterator[PoolConnectionProxy]:
        """A pooled connection made ready by ``prepare``, until ``deadline`` (monotonic; default: timeout from now)."""
        if deadline is None:
            deadline = time.monotonic() + self.timeout()
        left = deadline - time.monotonic()
        if left <= 0:
            raise self.error(None)
        try:
            async with asyncio.timeout(left):
                pool = await self._pools.get()
                conn = await pool.acquire()
        except Exception as exc:
            raise self.error(exc, connecting=True) from exc
        loop = asyncio.get_running_loop()  # at the deadline, whatever waits on the connection fails at once
        timer = loop.call_at(loop.time() + deadline - time.monotonic(), conn.terminate)
        failure: BaseException | None = None
        try:
            await self.prepare(conn)
            yield conn
        except BaseException as exc:
            failure = exc
            if not isinstance(exc, Exception):  # cancelled, maybe mid-statement: no wait for the server to confirm
                conn.terminate()
        timer.cancel()
        expired = time.monotonic() >= deadline
        try:
            await pool.release(conn)  # a terminated connection is replaced, not reused
        except Exception as exc:
            failure = failure or exc  # a failed release counts unless the operation failed already
        if isinstance(failure, Exception) and not isinstance(failure, ANSWERS):
            raise self.error(failure, expired=expired) from failure
        if failure is not None:
            raise failure
