"""The PostgreSQL store's connections: one pool per event loop, and a deadline on every operation.

Every operation ends within the store's ``timeout``, the wait for a connection included, even when the
server or the network stops answering: at the deadline the connection's socket is shut down, so the
driver fails at once (psycopg's own cancellation would wait for the frozen server), and the pool
discards the broken connection. Driver errors become :class:`~chatlab.stores.base.StoreError`.

Operations beyond ``max_size`` wait in line at the pool's gate (a semaphore of ``max_size``) rather than in the
pool: psycopg_pool's wait (a waiter object, a condition and an ``asyncio.wait_for`` task each) cost about a fifth
of a read's client CPU with 16 concurrent operations on 10 connections; a semaphore's wait is one future.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .base import IdempotencyKeyReused, StoreError, VersionMismatch
from .postgres_schema import ensure_schema

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

    from .postgres import PostgresChatHistoryStore

log = logging.getLogger(__name__)


def redacted(url: str) -> str:
    """host:port/database of a URL, without user or password, for messages and ``GET /``."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = parts.port or 5432
    database = parts.path.lstrip("/") or "(default database)"
    return f"{host}:{port}/{database}"


class Gate:
    """At most ``size`` operations hold a pooled connection at once; the others wait in line, first come first
    served, each until its own deadline."""

    def __init__(self, size: int) -> None:
        self._slots = asyncio.Semaphore(size)

    async def enter(self, deadline: float) -> None:
        """Take a place (:func:`time.monotonic` ``deadline``), or raise :class:`TimeoutError` at the deadline."""
        if not self._slots.locked():
            await self._slots.acquire()  # a free place: does not wait
            return
        async with asyncio.timeout_at(asyncio.get_running_loop().time() + deadline - time.monotonic()):
            await self._slots.acquire()

    def leave(self) -> None:
        self._slots.release()


async def open_pool(store: PostgresChatHistoryStore) -> AsyncConnectionPool:
    """The store's pool for the running loop (opened in the background: the first operation waits for it), with
    its :class:`Gate` as ``pool.chatlab_gate``."""
    from psycopg.conninfo import conninfo_to_dict
    from psycopg_pool import AsyncConnectionPool

    async def configure(conn: Any) -> None:
        if store.statement_timeout is not None:
            await conn.execute(
                "SELECT set_config('statement_timeout', %s, false)", (f"{int(store.statement_timeout * 1000)}",)
            )

    kwargs: dict[str, Any] = {"autocommit": True}
    if "connect_timeout" not in conninfo_to_dict(store.conninfo):
        kwargs["connect_timeout"] = max(2, int(store.timeout))
    pool = AsyncConnectionPool(
        store.conninfo,
        kwargs=kwargs,
        min_size=store.min_size,
        max_size=store.max_size,
        timeout=store.timeout,
        configure=configure,
        name=f"chatlab-{store.where}",
        open=False,
    )
    pool.chatlab_gate = Gate(store.max_size)  # type: ignore[attr-defined]
    await pool.open(wait=False)
    return pool


async def close_pool(pool: AsyncConnectionPool) -> None:
    await pool.close()


class Connection:
    """``async with``: a pooled connection with the schema in place; driver errors become StoreError.

    ``deadline`` (:func:`time.monotonic` seconds) ends the operation earlier than the store's timeout from now: a
    batch of operations ends by the earliest deadline among them.
    """

    def __init__(self, store: PostgresChatHistoryStore, deadline: float | None = None) -> None:
        self._store = store
        self._given = deadline
        self._pool: Any = None
        self._gate: Gate | None = None  # set while this operation holds a place at the gate
        self._conn: Any = None
        self._deadline: asyncio.TimerHandle | None = None
        self.expired = False

    def _expire(self) -> None:
        """The operation ran out of time: break its connection, so whatever waits on it fails now."""
        self.expired = True
        if self._conn is not None:
            shut_down(self._conn)

    async def __aenter__(self) -> Any:
        store = self._store
        now = time.monotonic()
        deadline = now + store.timeout if self._given is None else self._given
        self._deadline = asyncio.get_running_loop().call_later(deadline - now, self._expire)
        try:
            # getconn/putconn, not pool.connection(): its connection block only commits, and the connection is
            # in autocommit mode; putconn rolls back whatever a failed operation left open
            self._pool = await store._pools.get()
            gate: Gate = self._pool.chatlab_gate
            try:
                await gate.enter(deadline)
            except TimeoutError as exc:
                from psycopg_pool import PoolTimeout

                raise PoolTimeout(f"no connection available within {store.timeout:g} s") from exc
            self._gate = gate
            conn = self._conn = await self._pool.getconn(max(deadline - time.monotonic(), 0.001))
            if self.expired:  # the deadline passed while the pool handed it over
                shut_down(conn)
        except BaseException as exc:
            self._deadline.cancel()
            self._leave_gate()
            if isinstance(exc, Exception):
                raise store_error(store, exc, self.expired) from exc
            raise
        try:
            await ensure_schema(store, conn)
        except BaseException as exc:
            await self.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return conn

    def _leave_gate(self) -> None:
        if self._gate is not None:
            self._gate.leave()
            self._gate = None

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        assert self._deadline is not None
        self._deadline.cancel()
        try:
            await self._pool.putconn(self._conn)  # the pool discards a connection that is broken
        except Exception as exit_exc:
            if exc is None:
                raise store_error(self._store, exit_exc, self.expired) from exit_exc
        finally:
            self._leave_gate()
        if exc is not None and isinstance(exc, Exception) and not isinstance(exc, _ANSWERS):
            raise store_error(self._store, exc, self.expired) from exc


def shut_down(conn: Any) -> None:
    """Shut the connection's socket down (a duplicate of it: psycopg still owns the original)."""
    try:
        with socket.socket(fileno=os.dup(conn.pgconn.socket)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except Exception as exc:  # already closed: nothing left to break
        log.debug("shutting down a PostgreSQL connection failed: %r", exc)


#: Exceptions that are the store's answer (nothing written), not a failure of the database.
_ANSWERS = (StoreError, VersionMismatch, IdempotencyKeyReused)


def store_error(store: PostgresChatHistoryStore, exc: BaseException, expired: bool = False) -> StoreError:
    import psycopg
    from psycopg_pool import PoolTimeout

    if isinstance(exc, PoolTimeout):
        message = f"PostgreSQL at {store.where} is unreachable: no connection within {store.timeout:g} s"
    elif expired:
        message = f"PostgreSQL at {store.where} did not answer within {store.timeout:g} s (the store timeout)"
    elif isinstance(exc, psycopg.errors.QueryCanceled):
        message = f"PostgreSQL at {store.where} timed out: {exc}".strip()
    elif isinstance(exc, (psycopg.Error, OSError, asyncio.TimeoutError)):
        message = f"PostgreSQL at {store.where} failed: {exc}".strip()
    else:
        message = f"PostgreSQL store {store.where} failed: {exc!r}"
    log.warning("%s", message)
    return StoreError(message)
