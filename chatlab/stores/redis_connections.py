"""The Redis store's connections: one per event loop, pipelined, and a deadline on every operation.

Every operation ends within the store's ``timeout``, connecting included, even when Redis or the network stops
answering; the connection it waited on then takes no new operation and is closed once those on it ended. Nothing
is retried: a retried script that had run before its answer was lost would append twice (chatlab's client retries
with an ``Idempotency-Key`` instead). redis-py and socket errors become :class:`~chatlab.stores.base.StoreError`.

redis-py opens the connection (URL, TLS, sockets, credentials, database, handshake); the rest is chatlab's:
redis-py's client, pool and connection cost several times a command's own work per call (a pool lock,
observability hooks, a response callback table, a timeout object per reply, a stream reader and a system call
or two per command). Here one connection per event loop carries every operation, pipelined: the commands of one
turn of the loop go in one write, hiredis packs them and parses the replies as the transport delivers them. One
the server closed, or that got bytes nobody asked for, is replaced before anything more is sent.
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
_MULTI, _EXEC = b"*1\r\n$5\r\nMULTI\r\n", b"*1\r\n$4\r\nEXEC\r\n"


class _Link(asyncio.Protocol):
    """One connection after redis-py's handshake, shared by every request of its event loop (pipelined).

    redis-py's connection reads a reply through a stream reader and several coroutines, and carries one command at
    a time, each with a system call to send it and one to read its reply. Here the requests made in one turn of the
    event loop are written together (one ``send``, and Redis reads them with one ``read`` and answers with one
    ``write``), the transport hands the replies to hiredis, and each completes its request's future, in order. A
    request is one command or a transaction (its replies counted, the last one answered). Bytes no request asked
    for, or the end of the connection, leave it ``broken``; a request given up (its deadline) leaves it
    ``retired``: no new request goes to it, and it is closed once the requests on it have ended.
    """

    def __init__(self, connection: AbstractConnection, reader: Any, lost: type[Exception]) -> None:
        self.connection = connection  # redis-py's, kept to close it as redis-py does
        self._reader = reader
        self._lost = lost
        self._loop = asyncio.get_running_loop()
        self._waiting: deque[asyncio.Future[Any]] = deque()  # one per reply; None for all but a request's last
        self._unsent: list[bytes] = []
        self.active = 0  # requests awaiting a reply on it
        self.broken = self.retired = False
        writer = connection._writer  # redis-py's stream: its transport is taken over
        if writer is None:  # pragma: no cover - connect() opened it
            raise ConnectionError("redis-py opened no stream")
        self._transport: asyncio.Transport = writer.transport  # type: ignore[assignment]
        self._transport.set_protocol(self)

    def request(self, packed: bytes, replies: int) -> asyncio.Future[Any]:
        """Send ``packed`` (with the other requests of this turn of the loop); the future gets the last of its
        ``replies`` replies (an error reply as its exception object)."""
        future = self._loop.create_future()
        waiting = self._waiting
        for _ in range(replies - 1):
            waiting.append(None)  # type: ignore[arg-type]
        waiting.append(future)
        if not self._unsent:
            self._loop.call_soon(self._send)
        self._unsent.append(packed)
        return future

    def _send(self) -> None:
        unsent, self._unsent = self._unsent, []
        if not self.broken:
            self._transport.write(b"".join(unsent))

    def data_received(self, data: bytes) -> None:
        self._reader.feed(data)
        waiting = self._waiting
        while (reply := self._reader.gets()) is not _NOT_ENOUGH_DATA:
            if not waiting:
                self.broken = True  # nothing asked for it: out of step
                self._transport.close()
                return
            future = waiting.popleft()
            if future is not None and not future.done():  # done: given up (its deadline)
                future.set_result(reply)

    def eof_received(self) -> bool:
        return False  # closes the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.broken = True
        waiting, self._waiting = self._waiting, deque()
        for future in waiting:
            if future is not None and not future.done():
                future.set_exception(self._lost(f"Connection to Redis lost: {exc}" if exc else _CLOSED))


def _retrieve(task: asyncio.Task[Any]) -> None:
    """A connecting task's failure is its waiters' (when every one gave up, nobody's)."""
    if not task.cancelled():
        task.exception()


class RedisPool:
    """One event loop's connection to Redis, shared by its operations (at most ``limit`` open, retired ones
    still in use included)."""

    def __init__(self, url: str, limit: int, timeout: float) -> None:
        import redis.asyncio
        from redis._parsers.base import BaseParser
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff
        from redis.exceptions import ConnectionError, NoScriptError, RedisError

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
        self._timeout = timeout
        self.deadlines = Deadlines(timeout)
        self._pack: Callable[[tuple[Any, ...]], bytes] = pack_command
        self._reader_class, self._parse_error = Reader, BaseParser.parse_error
        # an error reply is what redis-py's parser makes of it: a ResponseError, NoScriptError, ...
        self._too_many, self._no_script, self._error_reply = ConnectionError, NoScriptError, RedisError
        self._link: _Link | None = None  # where new requests go
        self._connecting: asyncio.Task[_Link] | None = None
        self._open: set[AbstractConnection] = set()  # connecting and retired ones included

    async def _current(self) -> _Link:
        """The connection new requests go to: one the server closed is dropped, a new one opened (once, whoever
        waits for it; an operation giving up does not stop it, its own ``timeout`` does)."""
        link = self._link
        if link is not None:
            self._link = None
            link.retired = True
            if not link.active:
                await self._close(link)
        connecting = self._connecting
        if connecting is None:
            connecting = self._connecting = asyncio.get_running_loop().create_task(self._connect())
            connecting.add_done_callback(_retrieve)
        return await asyncio.shield(connecting)

    async def _connect(self) -> _Link:
        try:
            if len(self._open) >= self._limit:
                raise self._too_many("Too many connections")  # as redis-py's pool
            connection = self._factory()
            self._open.add(connection)
            try:
                async with asyncio.timeout(self._timeout):
                    await connection.connect()  # type: ignore[no-untyped-call]
                reader = self._reader_class(replyError=self._parse_error, notEnoughData=_NOT_ENOUGH_DATA)
                link = self._link = _Link(connection, reader, self._too_many)
            except BaseException:
                self._open.discard(connection)
                await connection.disconnect(nowait=True)
                raise
            return link
        finally:
            self._connecting = None

    async def _close(self, link: _Link) -> None:
        if link.connection in self._open:
            self._open.discard(link.connection)
            await link.connection.disconnect(nowait=True)

    async def _request(self, packed: bytes, replies: int) -> Any:
        """The last of the ``replies`` replies to ``packed`` (an error reply is returned, not raised)."""
        link = self._link
        if link is None or link.broken:
            link = await self._current()
        link.active += 1
        try:
            return await link.request(packed, replies)
        except BaseException:  # a cancellation (the deadline) included: no new request goes to this connection
            link.retired = True
            if self._link is link:
                self._link = None
            raise
        finally:
            link.active -= 1
            if link.retired and not link.active:
                await self._close(link)

    async def call(self, *args: Any) -> Any:
        """One command's reply (an error reply raised as redis-py raises it: ``ResponseError``, ...)."""
        reply = await self._request(self._pack(args), 1)
        if isinstance(reply, self._error_reply):
            raise reply
        return reply

    async def transaction(self, *commands: tuple[Any, ...]) -> list[Any]:
        """The replies of ``commands`` run as one atomic step (``MULTI`` ... ``EXEC``), sent in one write.

        Plain commands cost Redis about half of what the same commands in a Lua script cost (no script call, no
        conversion of every value to Lua and back).
        """
        packed = b"".join([_MULTI, *map(self._pack, commands), _EXEC])
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
        reply = await self._request(self._pack(("EVALSHA", _digest(script), len(keys), *keys, *args)), 1)
        if isinstance(reply, self._no_script):  # not run: sending it whole is safe
            reply = await self._request(self._pack(("EVAL", script, len(keys), *keys, *args)), 1)
        if isinstance(reply, self._error_reply):
            raise reply
        return reply

    async def close(self) -> None:
        """Close every connection, those in use and one being opened included."""
        if self._connecting is not None:
            self._connecting.cancel()
        connections, self._open, self._link = self._open, set(), None
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
