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

import asyncio
import hashlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from functools import cache
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


_NOT_ENOUGH_DATA = object()  # what hiredis answers while a reply is incomplete
_CLOSED = "Connection closed by server."  # redis-py's words


class _Link(asyncio.Protocol):
    """One connection after redis-py's handshake: requests written whole, replies parsed by hiredis as they arrive.

    redis-py's connection reads a reply through a stream reader and several coroutines, each of them a good part of
    what a short command costs; here the transport hands the bytes to hiredis and each reply completes its request's
    future. A request is one command or a transaction (its replies counted, the last one answered). Bytes no request
    asked for, or the end of the connection, leave it ``broken``: never used again.
    """

    def __init__(self, connection: AbstractConnection, reader: Any, lost: type[Exception]) -> None:
        self.connection = connection  # redis-py's, kept to close it as redis-py does
        self._reader = reader
        self._lost = lost
        self._waiting: deque[tuple[asyncio.Future[Any], int]] = deque()
        self._got = 0  # replies of the oldest request received so far
        self.broken = False
        writer = connection._writer  # redis-py's stream: its transport is taken over
        if writer is None:  # pragma: no cover - connect() opened it
            raise ConnectionError("redis-py opened no stream")
        self._transport: asyncio.Transport = writer.transport  # type: ignore[assignment]
        self._transport.set_protocol(self)

    def request(self, packed: bytes, replies: int) -> asyncio.Future[Any]:
        """Send ``packed``; the future gets its last reply of ``replies`` (an error reply as its exception object)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting.append((future, replies))
        self._transport.write(packed)
        return future

    def data_received(self, data: bytes) -> None:
        self._reader.feed(data)
        while (reply := self._reader.gets()) is not _NOT_ENOUGH_DATA:
            if not self._waiting:
                self.broken = True  # nothing asked for it: out of step
                self._transport.close()
                return
            self._got += 1
            future, replies = self._waiting[0]
            if self._got == replies:
                self._waiting.popleft()
                self._got = 0
                if not future.done():
                    future.set_result(reply)

    def eof_received(self) -> bool:
        return False  # closes the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.broken = True
        waiting, self._waiting = self._waiting, deque()
        for future, _ in waiting:
            if not future.done():
                future.set_exception(self._lost(f"Connection to Redis lost: {exc}" if exc else _CLOSED))


class RedisPool:
    """One event loop's connections to Redis: at most ``limit`` open, idle ones reused."""

    def __init__(self, url: str, limit: int, timeout: float) -> None:
        import redis.asyncio
        from redis._parsers.base import BaseParser
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff
        from redis.exceptions import ConnectionError, NoScriptError, RedisError, ResponseError

        try:  # hiredis packs commands and parses replies in C (chatlab[redis] installs it)
            from hiredis import Reader, pack_command
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError("the Redis store needs hiredis: pip install 'chatlab[redis]'") from exc

        # redis-py reads the URL (TLS, sockets, credentials, database), connects and says hello; then its
        # connection's transport is taken over (_Link)
        self._factory: Callable[[], AbstractConnection] = redis.asyncio.ConnectionPool.from_url(
            url, socket_timeout=None, socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 0)
        ).make_connection  # no socket timeout: the store's deadline bounds the whole operation
        self._limit = limit
        self.deadlines = Deadlines(timeout)
        self._pack: Callable[[tuple[Any, ...]], bytes] = pack_command
        self._reader_class, self._parse_error = Reader, BaseParser.parse_error
        self._too_many, self._no_script, self._error_reply = ConnectionError, NoScriptError, ResponseError
        self._redis_error = RedisError
        self._idle: list[_Link] = []
        self._open: set[AbstractConnection] = set()  # connecting ones included

    async def _checkout(self) -> _Link:
        """An idle connection (last in, first out), or a new one; one that was closed meanwhile is dropped."""
        while self._idle:
            link = self._idle.pop()
            if not link.broken:
                return link
            self._open.discard(link.connection)
            await link.connection.disconnect(nowait=True)
        if len(self._open) >= self._limit:
            raise self._too_many("Too many connections")  # as redis-py's pool
        connection = self._factory()
        self._open.add(connection)
        try:
            await connection.connect()  # type: ignore[no-untyped-call]
            reader = self._reader_class(replyError=self._parse_error, notEnoughData=_NOT_ENOUGH_DATA)
            return _Link(connection, reader, self._too_many)
        except BaseException:
            self._open.discard(connection)
            await connection.disconnect(nowait=True)
            raise

    async def _request(self, packed: bytes, replies: int) -> Any:
        """The last of the ``replies`` replies to ``packed`` (an error reply is returned, not raised)."""
        link = await self._checkout()
        try:
            reply = await link.request(packed, replies)
        except BaseException:  # a cancellation (the deadline) included: out of step, never reused
            self._open.discard(link.connection)
            await link.connection.disconnect(nowait=True)
            raise
        self._idle.append(link)  # every reply was read: the connection is in step
        return reply

    async def call(self, *args: Any) -> Any:
        """One command's reply (an error reply raised as redis-py's ``ResponseError``)."""
        reply = await self._request(self._pack(args), 1)
        if isinstance(reply, self._error_reply):
            raise reply
        return reply

    async def transaction(self, *commands: tuple[Any, ...]) -> list[Any]:
        """The replies of ``commands`` run as one atomic step (``MULTI`` ... ``EXEC``), sent in one write.

        Plain commands cost Redis about half of what the same commands in a Lua script cost (no script call, no
        conversion of every value to Lua and back).
        """
        pack = self._pack
        packed = b"".join([pack(("MULTI",)), *map(pack, commands), pack(("EXEC",))])
        replies = await self._request(packed, len(commands) + 2)
        if isinstance(replies, self._error_reply):  # EXECABORT: a command was refused, none ran
            raise replies
        for reply in replies:
            if isinstance(reply, self._error_reply):
                raise reply
        result: list[Any] = replies
        return result

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
