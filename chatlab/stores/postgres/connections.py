"""The PostgreSQL store's connections: an asyncpg pool per event loop, and a deadline on every operation.

Every operation ends within the store's ``timeout``, the wait for a connection included, even when the server or
the network stops answering: at the deadline the connection is terminated (``Connection.terminate()``: its socket
closed, nothing awaited), so whatever waits on it fails at once, and the pool replaces it with a new connection when
one is next needed. Driver errors become :class:`~chatlab.stores.base.StoreError`, which the service answers 503.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from .._loops import PerLoop
from .._urls import split_url
from ..base import IdempotencyKeyReused, StoreError, VersionMismatch
from ..metadata import MetadataError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from asyncpg import Pool
    from asyncpg.pool import PoolConnectionProxy

log = logging.getLogger(__name__)

CHATLAB_PARAMETERS = ("schema",)
"""Query parameters of a store URL that chatlab reads itself (the driver must not see them)."""

ANSWERS = (StoreError, VersionMismatch, IdempotencyKeyReused, MetadataError)
"""Exceptions that are the store's answer (nothing written), not a failure of the database."""


def redacted(url: str) -> str:
    """host:port/database of a URL, without user or password, for messages and ``GET /``."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = parts.port or 5432
    database = parts.path.lstrip("/") or "(default database)"
    return f"{host}:{port}/{database}"


@dataclass(frozen=True, slots=True)
class PoolSettings:
    """What every pool of a store is opened with."""

    dsn: str
    """The store's URL without chatlab's own parameters (libpq style; asyncpg reads it)."""
    min_size: int
    max_size: int
    statement_timeout: float | None
    """Seconds each statement may run on the server, lock waits included (``None``: the server's setting)."""
    connect_timeout: float

    @classmethod
    def of(
        cls, conninfo: str, *, min_size: int, max_size: int, statement_timeout: float | None, timeout: float
    ) -> PoolSettings:
        """The settings of a store's URL (without chatlab's parameters): libpq's ``connect_timeout`` is read here, as
        asyncpg would pass it to the server as a setting; without it a connection attempt may take ``timeout``."""
        dsn, libpq = split_url(conninfo, ("connect_timeout",))
        given = libpq.get("connect_timeout")
        connect_timeout = float(given) if given and float(given) > 0 else max(2.0, timeout)
        return cls(dsn, min_size, max_size, statement_timeout, connect_timeout)


class Connections:
    """The store's pools (one per event loop, opened on first use there) and the deadline of each operation."""

    def __init__(
        self,
        settings: PoolSettings,
        *,
        where: str,
        timeout: float,
        prepare: Callable[[PoolConnectionProxy], Awaitable[None]],
    ) -> None:
        self.settings = settings
        self.where = where
        self.timeout = timeout
        """Seconds each operation may take, from the call to the answer."""
        self.prepare = prepare
        """Run on each connection before its operation (the schema's check: at once once it is ready)."""
        self._pools: PerLoop[Pool] = PerLoop(self._open, self._close)

    def acquire(self, deadline: float | None = None) -> Lease:
        """``async with``: a pooled connection, made ready by ``prepare``, until ``deadline``
        (:func:`time.monotonic`; the store's ``timeout`` from now by default)."""
        return Lease(self, time.monotonic() + self.timeout if deadline is None else deadline)

    async def close(self) -> None:
        """Close every pool (a later operation opens new ones)."""
        await self._pools.close()

    def no_connection(self) -> StoreError:
        """The error of an operation whose deadline passed before it had a connection."""
        return self._failed(f"PostgreSQL at {self.where} is unreachable: no connection within {self.timeout:g} s")

    def error(self, exc: BaseException, *, expired: bool = False, connecting: bool = False) -> StoreError:
        """A driver's error as the store's."""
        import asyncpg

        if expired:
            message = f"PostgreSQL at {self.where} did not answer within {self.timeout:g} s (the store timeout)"
        elif connecting and isinstance(exc, TimeoutError):
            return self.no_connection()
        elif connecting and isinstance(exc, OSError | asyncpg.PostgresConnectionError):
            message = f"PostgreSQL at {self.where} is unreachable: {exc}".strip()
        elif isinstance(exc, asyncpg.QueryCanceledError):
            message = f"PostgreSQL at {self.where} timed out: {exc}".strip()
        elif isinstance(exc, asyncpg.PostgresError | asyncpg.InterfaceError | OSError | TimeoutError):
            message = f"PostgreSQL at {self.where} failed: {exc}".strip()
        else:
            message = f"PostgreSQL store {self.where} failed: {exc!r}"
        return self._failed(message)

    def _failed(self, message: str) -> StoreError:
        log.warning("%s", message)
        return StoreError(message)

    async def pool(self) -> Pool:
        """This event loop's pool (opened now if needed)."""
        return await self._pools.get()

    async def _open(self) -> Pool:
        import asyncpg

        s = self.settings
        server_settings = {}
        if s.statement_timeout is not None:
            server_settings["statement_timeout"] = str(int(s.statement_timeout * 1000))
        return await asyncpg.create_pool(
            s.dsn,
            min_size=s.min_size,
            max_size=s.max_size,
            timeout=s.connect_timeout,
            server_settings=server_settings,
            reset=_keep,
        )

    async def _close(self, pool: Pool) -> None:
        """Close a pool once its operations end; at the store's timeout, whatever is still running is cut off."""
        try:
            await asyncio.wait_for(pool.close(), self.timeout)
        except TimeoutError:
            pool.terminate()


async def _keep(conn: object) -> None:
    """A connection goes back to the pool as it is (the pool still rolls back a transaction left open): operations
    take only transaction-scoped locks and change no setting, so there is no session state to reset, and asyncpg's
    default reset would cost a round trip per operation."""


class Lease:
    """``async with``: one operation's connection, until its deadline; driver errors become StoreError."""

    def __init__(self, connections: Connections, deadline: float) -> None:
        self._connections = connections
        self._deadline = deadline
        self._pool: Pool | None = None
        self._conn: PoolConnectionProxy | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.expired = False

    def _expire(self) -> None:
        """The operation ran out of time: terminate its connection, so whatever waits on it fails now."""
        self.expired = True
        if self._conn is not None:
            self._conn.terminate()

    async def __aenter__(self) -> PoolConnectionProxy:
        connections = self._connections
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise connections.no_connection()
        try:
            async with asyncio.timeout(left):
                self._pool = await connections.pool()
                conn = self._conn = await self._pool.acquire()
        except Exception as exc:
            raise connections.error(exc, connecting=True) from exc
        loop = asyncio.get_running_loop()
        self._timer = loop.call_at(loop.time() + self._deadline - time.monotonic(), self._expire)
        try:
            await connections.prepare(conn)
        except BaseException as exc:
            await self.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return conn

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._timer is not None:
            self._timer.cancel()
        connections = self._connections
        try:
            if self._pool is not None and self._conn is not None:
                if exc is not None and not isinstance(exc, Exception):  # cancelled: maybe mid-statement
                    self._conn.terminate()  # rather than wait for the server to confirm a cancel request
                await self._pool.release(self._conn)  # a terminated connection is replaced, not reused
        except Exception as release_exc:
            if exc is None:
                raise connections.error(release_exc, expired=self.expired) from release_exc
        if isinstance(exc, Exception) and not isinstance(exc, ANSWERS):
            raise connections.error(exc, expired=self.expired) from exc
