"""Chat history in Redis, shared by any number of service processes.

Uses ``redis`` (redis-py) with asyncio (``pip install 'chatlab[redis]'``).

Layout, under a key prefix (``chatlab:`` unless the URL says ``?prefix=...``):

* ``{prefix}meta``: a hash; ``schema_version`` is the layout's version.
* ``{prefix}conversations``: a sorted set of every conversation key, all with score 0, so
  Redis orders them by their bytes (UTF-8: code point order, as the other stores).
* ``{prefix}messages:{key}``: a list of the conversation's messages, in order, as the bytes
  they were given.
* ``{prefix}version:{key}``: the conversation's version (layout version 2; a conversation
  written by version 1 has none and reads as ``unversioned`` until its next write).
* ``{prefix}idempotency:{len(key)}:{key}:{idempotency key}``: ``fingerprint version`` of an
  idempotent append, expiring after its TTL (``PX``).
* ``{prefix}times:{key}``: ``"<created> <updated>"``, seconds since the epoch by the store's clock
  (layout version 3), and ``{prefix}updated``: a sorted set of every conversation key scored by
  its last write, which the retention :meth:`sweep` reads. With a retention, every write also
  sets the conversation's keys to expire that long after it (``PEXPIREAT``), so Redis frees them
  even when no service sweeps; a conversation whose keys expired reads as absent
  (:mod:`chatlab.stores.redis_operations`).

Guarantees: every write is one Lua script (:mod:`chatlab.stores.redis_scripts`), which Redis
runs as one atomic step. So an append (``ZADD`` + ``RPUSH`` of the whole batch) lands contiguously
and in order, all or nothing, whatever other clients (other service processes included) append
meanwhile; a replace (``DEL`` + ``RPUSH``) and a delete (``ZREM`` + ``DEL``) are whole too; and an
``if_match`` condition or an idempotency record is checked in the same step as the write and the
record (every script by ``EVALSHA``). Summaries run as one Lua script too, and a read as one ``MULTI``/``EXEC`` of
plain commands: each a consistent snapshot.

Every operation ends within ``timeout`` seconds, connecting included, even when Redis or the network
stops answering; the connection it waited on then takes no new command and is closed once the commands
on it ended. Nothing is retried: a
retried script that had run before its answer was lost would append twice (chatlab's
client retries with an ``Idempotency-Key`` instead). See :mod:`chatlab.stores.redis_connections`.

Durability is Redis's own: with no persistence (``save ""``, ``appendonly no``) everything
is lost when Redis restarts; see docs/stores.md for ``appendonly yes`` and ``appendfsync``.
A crash of the chatlab service process itself never loses an acknowledged write: it was in
Redis before the service answered.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from typing import Any

from . import redis_scripts as scripts
from ._loops import PerLoop
from ._urls import split_url
from .base import (
    ABSENT,
    ChatHistoryStore,
    Conversation,
    ConversationSlice,
    ConversationSummary,
    EncodedMessage,
    Idempotency,
    IdempotencyKeyReused,
    StoreError,
    VersionMismatch,
    WriteResult,
    check_slice,
    new_generation,
    new_version,
    prefix_upper_bound,
)
from .redis_connections import RedisConnections, RedisPool, redacted
from .redis_operations import RedisOperations, summary
from .redis_scripts import UNVERSIONED as UNVERSIONED  # where it was before

log = logging.getLogger(__name__)

SCHEMA_VERSION = 3

DEFAULT_PREFIX = "chatlab:"

#: Query parameters of a store URL that chatlab reads itself (redis-py would refuse them).
CHATLAB_PARAMETERS = ("prefix",)


class RedisChatHistoryStore(RedisConnections, RedisOperations, ChatHistoryStore):
    """History in Redis lists (layout created on first use).

    ``url`` is a redis-py URL (``redis://host:6379/0``, ``rediss://`` for TLS); the extra
    query parameter ``prefix=...`` (or the ``prefix`` argument) namespaces every key.
    ``timeout`` bounds each operation, connecting included. Each event loop's operations share one connection
    (pipelined); ``max_connections`` bounds those open, including ones that timed out and still drain.
    """

    schema_version = SCHEMA_VERSION

    def __init__(self, url: str, *, prefix: str | None = None, timeout: float = 5.0, max_connections: int = 50) -> None:
        try:
            import redis.asyncio  # noqa: F401
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError("the Redis store needs redis-py: pip install 'chatlab[redis]'") from exc
        client_url, ours = split_url(url, CHATLAB_PARAMETERS)
        self.client_url = client_url
        self.prefix = prefix if prefix is not None else ours.get("prefix", DEFAULT_PREFIX)
        self.timeout = timeout
        self.max_connections = max_connections
        self.where = redacted(client_url)
        self.description = (
            f"Chat history is stored in Redis at {self.where} (key prefix {self.prefix!r}) and exposed over HTTP."
        )
        self._meta_key = f"{self.prefix}meta"
        self._index_key = f"{self.prefix}conversations"
        self._list_prefix = f"{self.prefix}messages:"
        self._version_prefix = f"{self.prefix}version:"
        self._idempotency_prefix = f"{self.prefix}idempotency:"
        self._times_prefix = f"{self.prefix}times:"
        self._updated_key = f"{self.prefix}updated"
        self._clients: PerLoop[RedisPool] = PerLoop(self._open_client, self._close_client)
        self._schema_ready = False

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.where} prefix={self.prefix!r}>"

    def _list_key(self, conversation_key: str) -> bytes:
        return (self._list_prefix + conversation_key).encode("utf-8")

    def _version_key(self, conversation_key: str) -> bytes:
        return (self._version_prefix + conversation_key).encode("utf-8")

    def _times_key(self, conversation_key: str) -> bytes:
        return (self._times_prefix + conversation_key).encode("utf-8")

    def _idempotency_key(self, conversation_key: str, idempotency_key: str) -> bytes:
        # the length makes the split unambiguous whatever characters the two keys hold
        return f"{self._idempotency_prefix}{len(conversation_key)}:{conversation_key}:{idempotency_key}".encode()

    # -- the layout ---------------------------------------------------------------------

    async def _check_layout(self, pool: RedisPool) -> None:
        """Create the layout, or upgrade it, or refuse one this chatlab does not know (once per store)."""
        if not self._schema_ready:
            version = await pool.script(scripts.SCHEMA, [self._meta_key], [SCHEMA_VERSION])
            if version is not None and int(version) in (1, 2):
                # Layout 2 only adds keys (conversations without a version read as unversioned);
                # layout 3 gives each conversation times (marking it keeps older chatlab versions away).
                await self._upgrade_to_3(pool)
                await pool.call("HSET", self._meta_key, "schema_version", SCHEMA_VERSION)
                version = str(SCHEMA_VERSION).encode()
            if version is None or int(version) != SCHEMA_VERSION:
                raise StoreError(
                    f"Redis store {self.where} prefix {self.prefix!r} has schema version "
                    f"{version.decode() if version else None}; this chatlab reads version {SCHEMA_VERSION} "
                    "(and upgrades versions 1 and 2) only"
                )
            self._schema_ready = True

    # -- the store interface ----------------------------------------------------------

    async def get(self, conversation_key: str) -> list[EncodedMessage]:
        async def work(pool: RedisPool) -> list[EncodedMessage]:
            messages: list[Any] = await pool.call("LRANGE", self._list_key(conversation_key), 0, -1)
            return messages

        return await self._guard(work)

    async def _read(self, conversation_key: str, first: int | None, last: int) -> tuple[str, int, list[Any]]:
        """Version, count and the messages from ``first`` to ``last`` (LRANGE's; ``first`` None: none), one snapshot.

        One ``MULTI``/``EXEC`` of plain commands, not a script: Redis spends about half as much on it. A conversation
        without a version is one of layout 1 (unversioned) if it has messages and is in the index, else absent
        (never written, deleted, or its keys expired).
        """
        list_key = self._list_key(conversation_key)
        commands: list[tuple[Any, ...]] = [
            ("GET", self._version_key(conversation_key)),
            ("ZSCORE", self._index_key, conversation_key.encode("utf-8")),
        ]
        whole = first == 0 and last == -1
        if first is not None:
            commands.append(("LRANGE", list_key, first, last))
        if not whole:
            commands.append(("LLEN", list_key))

        async def work(pool: RedisPool) -> list[Any]:
            return await pool.transaction(*commands)

        version, indexed, *rest = await self._guard(work)
        messages: list[Any] = rest[0] if first is not None else []
        count: int = len(messages) if whole else rest[-1]
        if version is not None:
            return version.decode(), count, messages
        return UNVERSIONED if count and indexed is not None else ABSENT, count, messages

    async def read(self, conversation_key: str) -> Conversation:
        version, _, messages = await self._read(conversation_key, 0, -1)
        return Conversation(messages, version)

    async def read_slice(self, conversation_key: str, after: int = 0, limit: int | None = None) -> ConversationSlice:
        check_slice(after, limit)
        # LRANGE walks from the nearer end of the list: the newest messages are cheap
        last = -1 if limit is None else after + limit - 1
        version, count, messages = await self._read(conversation_key, None if limit == 0 else after, last)
        return ConversationSlice(messages, after, count, version)

    @staticmethod
    def _conditions(if_match: Collection[str] | None) -> list[str | int]:
        return [-1] if if_match is None else [len(if_match), *if_match]

    async def append(
        self,
        conversation_key: str,
        messages: Sequence[EncodedMessage],
        *,
        if_match: Collection[str] | None = None,
        idempotency: Idempotency | None = None,
    ) -> WriteResult:
        batch = [bytes(m) for m in messages]
        if not batch and if_match is None and idempotency is None:
            return WriteResult((await self.read(conversation_key)).version)
        generation = new_generation()
        keys: list[Any] = [
            self._index_key,
            self._list_key(conversation_key),
            self._version_key(conversation_key),
            self._idempotency_key(conversation_key, idempotency.key) if idempotency else self._meta_key,
            self._times_key(conversation_key),
            self._updated_key,
        ]
        args: list[Any] = [
            conversation_key.encode("utf-8"),
            generation,
            idempotency.fingerprint if idempotency else "",
            max(1, int(idempotency.ttl * 1000)) if idempotency else 0,
            *self._write_times(),
            *self._conditions(if_match),
            *batch,
        ]

        async def work(pool: RedisPool) -> list[bytes]:
            result: list[bytes] = await pool.script(scripts.APPEND, keys, args)
            return result

        status, value = await self._guard(work)
        return self._outcome(status, value, idempotency)

    async def replace(
        self, conversation_key: str, messages: Sequence[EncodedMessage], *, if_match: Collection[str] | None = None
    ) -> WriteResult:
        batch = [bytes(m) for m in messages]
        keys: list[Any] = self._conversation_keys(conversation_key)
        args: list[Any] = [
            conversation_key.encode("utf-8"),
            new_version(len(batch)),
            *self._write_times(),
            *self._conditions(if_match),
            *batch,
        ]

        async def work(pool: RedisPool) -> list[bytes]:
            result: list[bytes] = await pool.script(scripts.REPLACE, keys, args)
            return result

        status, value = await self._guard(work)
        return self._outcome(status, value, None)

    @staticmethod
    def _outcome(status: bytes, value: bytes, idempotency: Idempotency | None) -> WriteResult:
        if status == b"mismatch":
            raise VersionMismatch(value.decode())
        if status == b"reused":
            raise IdempotencyKeyReused(idempotency.key if idempotency else "")
        return WriteResult(value.decode(), replayed=status == b"replayed")

    async def delete(self, conversation_key: str, *, if_match: Collection[str] | None = None) -> None:
        keys: list[Any] = self._conversation_keys(conversation_key)
        args: list[Any] = [conversation_key.encode("utf-8"), *self._conditions(if_match)]

        async def work(pool: RedisPool) -> list[bytes]:
            result: list[bytes] = await pool.script(scripts.DELETE, keys, args)
            return result

        status, value = await self._guard(work)
        self._outcome(status, value, None)

    async def summaries(self, prefix: str = "") -> list[ConversationSummary]:
        async def work(pool: RedisPool) -> list[ConversationSummary]:
            low, high = b"-", b"+"
            if prefix:
                upper = prefix_upper_bound(prefix)
                low = b"[" + prefix.encode("utf-8")
                high = b"(" + upper.encode("utf-8") if upper is not None else b"+"
            args = [self._list_prefix, low, high, self._version_prefix, self._times_prefix]
            flat: list[Any] = await pool.script(scripts.SUMMARIES, [self._index_key], args)
            return [summary(*flat[i : i + 4]) for i in range(0, len(flat), 4)]

        return await self._guard(work)

    async def close(self) -> None:
        """Close the clients and their connections (a later call opens new ones)."""
        await self._clients.close()
