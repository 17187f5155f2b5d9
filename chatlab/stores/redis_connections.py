"""The Redis store's connections: one small pool per event loop, and a deadline on every operation.

Every operation ends within the store's ``timeout``, connecting included, even when Redis or the network
stops answering; the connection it waited on is then closed, never reused. Nothing is retried: a retried
script that had run before its answer was lost would append twice (chatlab's client retries with an
``Idempotency-Key`` instead). redis-py and socket errors become :class:`~chatlab.stores.base.StoreError`.

The pool is chatlab's, the connections and the protocol (hiredis) redis-py's: redis-py's client and pool
cost several times a command's own work per call (a pool lock, observability hooks, a response callback
table, a timeout object per reply, a task per send with ``socket_timeout``). Here a connection carries one
command at a time; idle ones are reused last in, first out, and checked on checkout as redis-py's pool does
(one the server closed, or with unread bytes, is reconnected before anything is sent).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from functools import cache
from operator import methodcaller
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from ._deadlines import Deadlines
from ._loops import PerLoop
from .base import StoreError

if TYPE_CHECKING:
    from redis.asyncio.connection import AbstractConnection

R = TypeVar("R")

log = logging.getLogger(__name__)


def redacted(url: str) -> str:
    """host:port/database (or the socket's path) of a URL, without user or password, for messages."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return f"unix:{parts.path}"
    host = parts.hostname or "localhost"
    port = parts.port or 6379
    database = parts.path.lstrip("/") or "0"
    return f"{host}:{port}/{database}"


@cache
def _digest(script: str) -> str:
    return hashlib.sha1(script.encode()).hexdigest()


class RedisPool:
    """One event loop's connections to Redis: at most ``limit`` open, idle ones reused."""

    def __init__(self, url: str, limit: int, timeout: float) -> None:
        import redis.asyncio
        from redis.asyncio.connection import AbstractConnection
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff
        from redis.exceptions import ConnectionError, NoScriptError, RedisError, ResponseError

        # redis-py's pool only reads the URL (TLS, sockets, credentials, database) and makes connections
        self._factory: Callable[[], AbstractConnection] = redis.asyncio.ConnectionPool.from_url(
            url, socket_timeout=None, socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 0)
        ).make_connection  # no socket timeout: the store's deadline bounds the whole operation
        self._limit = limit
        self.deadlines = Deadlines(timeout)
        self._pack: Callable[[tuple[Any, ...]], bytes] | None = None
        try:  # hiredis packs a command in C, several times faster than redis-py (chatlab[redis] installs it)
            from hiredis import pack_command

            self._pack = pack_command
        except ImportError:  # pragma: no cover - depends on the install
            pass
        self._too_many, self._no_script, self._error_reply = ConnectionError, NoScriptError, ResponseError
        self._redis_error = RedisError
        # redis-py 8 checks without reading; older ones read (and drop) what a dirty connection holds
        self._dirty = methodcaller("can_read" if hasattr(AbstractConnection, "can_read") else "can_read_destructive")
        self._idle: list[AbstractConnection] = []
        self._open: set[AbstractConnection] = set()

    def _checkout(self) -> AbstractConnection:
        if self._idle:
            return self._idle.pop()
        if len(self._open) >= self._limit:
            raise self._too_many("Too many connections")  # as redis-py's pool
        connection = self._factory()
        self._open.add(connection)
        return connection

    async def _reopen_if_stale(self, connection: AbstractConnection) -> None:
        """As redis-py's pool: a connection the server closed, or with bytes unread, is opened again."""
        if connection.is_connected:
            try:
                if not await self._dirty(connection):
                    return
            except (OSError, self._redis_error):
                pass
            await connection.disconnect()

    async def call(self, *args: Any) -> Any:
        """One command's reply (an error reply raised as redis-py's ``ResponseError``)."""
        connection = self._checkout()
        try:
            await self._reopen_if_stale(connection)
            packed = self._pack(args) if self._pack else connection.pack_command(*args)
            await connection.send_packed_command(packed, check_health=False)
            reply = await connection.read_response()
        except self._error_reply:
            self._idle.append(connection)  # the whole reply was read: the connection is in step
            raise
        except BaseException:  # a cancellation (the deadline) included: never reused
            self._open.discard(connection)
            await connection.disconnect(nowait=True)
            raise
        self._idle.append(connection)
        return reply

    async def script(self, script: str, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """A Lua script's reply, run by its digest; its text is sent only when Redis has not cached it yet."""
        try:
            return await self.call("EVALSHA", _digest(script), len(keys), *keys, *args)
        except self._no_script:  # not run: sending it whole is safe
            return await self.call("EVAL", script, len(keys), *keys, *args)

    async def close(self) -> None:
        """Close every connection, those in use included."""
        connections, self._open, self._idle = self._open, set(), []
        for connection in connections:
            await connection.disconnect(nowait=True)


class RedisConnections:
    """Mixed into :class:`~chatlab.stores.redis.RedisChatHistoryStore`: opens its pools, guards each operation."""

    client_url: str
    timeout: float
    max_connections: int
    where: str
    _clients: PerLoop[RedisPool]
    _schema_ready: bool
    _check_layout: Callable[[RedisPool], Awaitable[None]]

    async def _open_client(self) -> RedisPool:
        return RedisPool(self.client_url, self.max_connections, self.timeout)

    @staticmethod
    async def _close_client(pool: RedisPool) -> None:
        await pool.close()

    async def _first(self, pool: RedisPool, work: Callable[[RedisPool], Awaitable[R]]) -> R:
        await self._check_layout(pool)
        return await work(pool)

    async def _guard(self, work: Callable[[RedisPool], Awaitable[R]]) -> R:
        """Await ``work(pool)``; redis-py and socket errors become StoreError."""
        try:
            pool = await self._clients.get()  # no I/O: connections open on first use
            # a command cancelled at the deadline closes its connection
            return await pool.deadlines.run(work(pool) if self._schema_ready else self._first(pool, work))
        except StoreError:
            raise
        except Exception as exc:
            message = self._failure(exc)
            if message is None:
                raise
        log.warning("%s", message)
        raise StoreError(message)

    def _failure(self, exc: Exception) -> str | None:
        """What a redis-py or socket error (or the deadline) says; None for any other exception."""
        import redis.exceptions

        if isinstance(exc, TimeoutError):
            return f"Redis at {self.where} did not answer within {self.timeout:g} s (the store timeout)"
        if isinstance(exc, redis.exceptions.TimeoutError):
            return f"Redis at {self.where} timed out: {exc}"
        if isinstance(exc, redis.exceptions.ConnectionError):
            return f"Redis at {self.where} is unreachable: {exc}"
        if isinstance(exc, (redis.exceptions.RedisError, OSError)):
            return f"Redis at {self.where} failed: {exc}"
        return None
