"""Chat history in Redis, shared by any number of service processes.

Uses ``redis`` (redis-py) with asyncio (``pip install 'chatlab[redis]'``).

Layout, under a key prefix (``chatlab:`` unless the URL says ``?prefix=...``):

* ``{prefix}meta``: a hash; ``schema_version`` is the layout's version.
* ``{prefix}conversations``: a sorted set of every conversation key, all with score 0, so
  Redis orders them by their bytes (UTF-8: code point order, as the other stores).
* ``{prefix}messages:{key}``: a list of the conversation's messages, in order, as the bytes
  they were given.

Guarantees: an append is one ``MULTI``/``EXEC`` transaction (``ZADD`` + one ``RPUSH`` of the
whole batch), so the batch lands contiguously and in order, all or nothing, whatever other
clients (other service processes included) append meanwhile; replace (``DEL`` + ``RPUSH``)
and delete (``DEL`` + ``ZREM``) are transactions too. Summaries run as one Lua script, a
consistent snapshot of every conversation with its ``LLEN``.

Durability is Redis's own: with no persistence (``save ""``, ``appendonly no``) everything
is lost when Redis restarts; see docs/stores.md for ``appendonly yes`` and ``appendfsync``.
A crash of the chatlab service process itself never loses an acknowledged write: it was in
Redis before the service answered.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ._loops import PerLoop
from .base import ChatHistoryStore, ConversationSummary, EncodedMessage, StoreError

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1

DEFAULT_PREFIX = "chatlab:"

#: Query parameters of a store URL that chatlab reads itself (redis-py would refuse them).
CHATLAB_PARAMETERS = ("prefix",)

# KEYS[1] = the conversations sorted set; ARGV[1] = the prefix of message lists.
_SUMMARIES = """
local keys = redis.call('ZRANGE', KEYS[1], 0, -1)
local result = {}
for i, key in ipairs(keys) do
    result[2 * i - 1] = key
    result[2 * i] = redis.call('LLEN', ARGV[1] .. key)
end
return result
"""


def split_url(url: str) -> tuple[str, dict[str, str]]:
    """The redis-py URL without chatlab's own query parameters, and those parameters."""
    parts = urlsplit(url)
    ours: dict[str, str] = {}
    theirs: list[tuple[str, str]] = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        (ours.__setitem__(name, value) if name in CHATLAB_PARAMETERS else theirs.append((name, value)))
    return urlunsplit(parts._replace(query=urlencode(theirs))), ours


def _redacted(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return f"unix:{parts.path}"
    host = parts.hostname or "localhost"
    port = parts.port or 6379
    database = parts.path.lstrip("/") or "0"
    return f"{host}:{port}/{database}"


class RedisChatHistoryStore(ChatHistoryStore):
    """History in Redis lists (layout created on first use).

    ``url`` is a redis-py URL (``redis://host:6379/0``, ``rediss://`` for TLS); the extra
    query parameter ``prefix=...`` (or the ``prefix`` argument) namespaces every key.
    ``timeout`` bounds connecting and each command.
    """

    schema_version = SCHEMA_VERSION

    def __init__(self, url: str, *, prefix: str | None = None, timeout: float = 10.0, max_connections: int = 50) -> None:
        try:
            import redis.asyncio  # noqa: F401
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError("the Redis store needs redis-py: pip install 'chatlab[redis]'") from exc
        client_url, ours = split_url(url)
        self.client_url = client_url
        self.prefix = prefix if prefix is not None else ours.get("prefix", DEFAULT_PREFIX)
        self.timeout = timeout
        self.max_connections = max_connections
        self.where = _redacted(client_url)
        self.description = (
            f"Chat history is stored in Redis at {self.where} (key prefix {self.prefix!r}) and exposed over HTTP."
        )
        self._meta_key = f"{self.prefix}meta"
        self._index_key = f"{self.prefix}conversations"
        self._list_prefix = f"{self.prefix}messages:"
        self._clients: PerLoop[Redis] = PerLoop(self._open_client, self._close_client)
        self._schema_ready = False

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.where} prefix={self.prefix!r}>"

    def _list_key(self, conversation_key: str) -> bytes:
        return (self._list_prefix + conversation_key).encode("utf-8")

    # -- connections ------------------------------------------------------------------

    async def _open_client(self) -> Redis:
        import redis.asyncio

        return redis.asyncio.Redis.from_url(
            self.client_url,
            socket_timeout=self.timeout,
            socket_connect_timeout=self.timeout,
            max_connections=self.max_connections,
            decode_responses=False,
        )

    @staticmethod
    async def _close_client(client: Redis) -> None:
        await client.aclose()

    async def _client(self) -> Redis:
        client = await self._clients.get()
        if not self._schema_ready:
            pipe = client.pipeline(transaction=True)
            pipe.hsetnx(self._meta_key, "schema_version", str(SCHEMA_VERSION))
            pipe.hget(self._meta_key, "schema_version")
            _, version = await pipe.execute()
            if version is None or int(version) != SCHEMA_VERSION:
                raise StoreError(
                    f"Redis store {self.where} prefix {self.prefix!r} has schema version "
                    f"{version.decode() if version else None}; this chatlab reads version {SCHEMA_VERSION} only"
                )
            self._schema_ready = True
        return client

    async def _guard(self, work: Any) -> Any:
        """Await ``work(client)``; redis-py and socket errors become StoreError."""
        import redis.exceptions

        try:
            client = await self._client()
            return await work(client)
        except StoreError:
            raise
        except (redis.exceptions.TimeoutError, asyncio.TimeoutError) as exc:
            message = f"Redis at {self.where} timed out: {exc}"
        except redis.exceptions.ConnectionError as exc:
            message = f"Redis at {self.where} is unreachable: {exc}"
        except (redis.exceptions.RedisError, OSError) as exc:
            message = f"Redis at {self.where} failed: {exc}"
        log.warning("%s", message)
        raise StoreError(message)

    # -- the store interface ----------------------------------------------------------

    async def get(self, conversation_key: str) -> list[EncodedMessage]:
        async def work(client: Redis) -> list[EncodedMessage]:
            return list(await client.lrange(self._list_key(conversation_key), 0, -1))

        return await self._guard(work)

    async def append(self, conversation_key: str, messages: Sequence[EncodedMessage]) -> None:
        if not messages:
            return
        batch = [bytes(m) for m in messages]

        async def work(client: Redis) -> None:
            pipe = client.pipeline(transaction=True)
            pipe.zadd(self._index_key, {conversation_key.encode("utf-8"): 0})
            pipe.rpush(self._list_key(conversation_key), *batch)
            await pipe.execute()

        await self._guard(work)

    async def replace(self, conversation_key: str, messages: Sequence[EncodedMessage]) -> None:
        batch = [bytes(m) for m in messages]

        async def work(client: Redis) -> None:
            pipe = client.pipeline(transaction=True)
            pipe.zadd(self._index_key, {conversation_key.encode("utf-8"): 0})
            pipe.delete(self._list_key(conversation_key))
            if batch:
                pipe.rpush(self._list_key(conversation_key), *batch)
            await pipe.execute()

        await self._guard(work)

    async def delete(self, conversation_key: str) -> None:
        async def work(client: Redis) -> None:
            pipe = client.pipeline(transaction=True)
            pipe.zrem(self._index_key, conversation_key.encode("utf-8"))
            pipe.delete(self._list_key(conversation_key))
            await pipe.execute()

        await self._guard(work)

    async def summaries(self) -> list[ConversationSummary]:
        async def work(client: Redis) -> list[ConversationSummary]:
            flat = await client.eval(_SUMMARIES, 1, self._index_key, self._list_prefix)
            return [
                ConversationSummary(flat[i].decode("utf-8"), int(flat[i + 1])) for i in range(0, len(flat), 2)
            ]

        return await self._guard(work)

    async def close(self) -> None:
        """Close the clients and their connections (a later call opens new ones)."""
        await self._clients.close()
