"""The Redis store, shared by any number of service processes. Every operation is one Lua script (``scripts``), one
atomic step: an append lands whole and in order, its condition and idempotency record are checked in the same step,
a read is one snapshot. Listing merges a page from each bucket (``keys``). Each ends within ``timeout`` seconds."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from operator import itemgetter
from typing import Any

from .._loops import PerLoop
from .._urls import split_url
from ..base import (
    ChatHistoryStore,
    Conversation,
    ConversationRecord,
    ConversationSlice,
    ConversationSummary,
    EncodedMessage,
    Idempotency,
    IdempotencyKeyReused,
    Metadata,
    MetadataChanged,
    StoreError,
    VersionMismatch,
    WriteResult,
    check_slice,
    listing_start,
    new_generation,
    new_version,
    prefix_upper_bound,
)
from ..metadata import MAX_TAGS, MetadataChange, TooManyTags
from . import scripts
from .connections import CLUSTER_SCHEMES, Calls, open_calls, redacted
from .keys import Layout
from .upgrade import STEP, upgrade

log = logging.getLogger(__name__)

SCHEMA_VERSION = 6
UPGRADED = (1, 2, 3, 4, 5)  # the older layouts upgraded in place (1 to 3 on a single server only)
DEFAULT_PREFIX = "chatlab:"

#: Query parameters of a store URL that chatlab reads itself (redis-py would refuse them).
CHATLAB_PARAMETERS: tuple[str, ...] = ("prefix", "buckets")

#: A new store's bucket count on a cluster: enough hash slots to spread over a few primaries, few enough to list.
CLUSTER_BUCKETS = 64


def _conditions(if_match: Collection[str] | None) -> list[str | int]:
    return [-1] if if_match is None else [len(if_match), *if_match]


def _outcome(reply: list[bytes], idempotency: Idempotency | None = None) -> WriteResult:
    status, value = reply
    if status == b"mismatch":
        raise VersionMismatch(value.decode())
    if status == b"reused":
        raise IdempotencyKeyReused(idempotency.key if idempotency else "")
    return WriteResult(value.decode(), replayed=status == b"replayed")


def _condition(expected: Metadata | None) -> list[bytes | int]:
    """A metadata condition as the scripts' ``metadata_is`` reads it (``''``: none)."""
    if expected is None:
        return [b""]
    title = b"-" if expected.title is None else b"=" + expected.title.encode("utf-8")
    parts: list[bytes | int] = [title, len(expected.tags)]
    for name, value in expected.tags.items():
        parts += [name.encode("utf-8"), value.encode("utf-8")]
    return parts


def _changed(reply: list[Any]) -> MetadataChanged:
    """The refusal of a write whose metadata condition failed, from the script's ``{'changed', summary}`` (the
    summary left out when the conversation is absent)."""
    if len(reply) < 2:
        return MetadataChanged(None, {})
    held = _summary(*reply[1])
    return MetadataChanged(held.title, dict(held.tags))


def _stream_gone(exc: Exception) -> bool:
    """Whether ``exc`` is redis-py's cluster client using a connection whose stream a failing node's disconnect set to
    ``None`` under a command being sent (an ``AttributeError`` on ``None``, redis/redis-py#4287): the node is
    unreachable, as a ``ConnectionError`` would have said. Recognised by the error's type and the object it names,
    the ``obj`` attribute Python sets on every failed attribute lookup."""
    return isinstance(exc, AttributeError) and exc.obj is None


def _patch(sets_title: bool, title: str | None, tags: Mapping[str, str | None]) -> list[bytes]:
    """A metadata change as the scripts' ``patch`` reads it: ``-`` removes, ``=`` and a value sets."""
    parts = [b"" if not sets_title else b"-" if title is None else b"=" + title.encode("utf-8")]
    for name, value in tags.items():
        parts += [name.encode("utf-8"), b"-" if value is None else b"=" + value.encode("utf-8")]
    return parts


def _summary(
    key: bytes, count: int, version: bytes, times: bytes, metadata: list[bytes], participants: list[bytes]
) -> ConversationSummary:
    """One conversation as the scripts give it (see ``summary`` in the scripts)."""
    created, updated = (float(time) if time else None for time in times.decode().partition(" ")[::2])
    parts = [part.decode("utf-8") for part in metadata]
    fields = dict(zip(parts[::2], parts[1::2], strict=True))
    tags = {name[4:]: value for name, value in fields.items() if name.startswith("tag:")}
    authors = {
        name.decode("utf-8"): int(value) for name, value in zip(participants[::2], participants[1::2], strict=True)
    }
    return ConversationSummary(
        key.decode("utf-8"), int(count), version.decode(), created, updated, fields.get("title"), tags, authors
    )


class RedisChatHistoryStore(ChatHistoryStore):
    """History in Redis lists (layout created on first use, older layouts upgraded). The URLs, ``prefix``, ``buckets``
    (argument or URL parameter) and ``max_connections`` (per event loop, per node on a cluster): docs/stores.md."""

    schema_version = SCHEMA_VERSION

    def __init__(
        self,
        url: str,
        *,
        prefix: str | None = None,
        timeout: float = 5.0,
        max_connections: int = 50,
        buckets: int | None = None,
    ) -> None:
        try:
            import redis.asyncio
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError("the Redis store needs redis-py: pip install 'chatlab[redis]'") from exc
        self.client_url, ours = split_url(url, CHATLAB_PARAMETERS)
        self.cluster = self.client_url.split("://", 1)[0].lower() in CLUSTER_SCHEMES
        if self.cluster and int(redis.__version__.split(".", 1)[0]) < 8:
            # before 8, its cluster client follows a failover only when it retries calls, which this store must not
            raise ImportError(
                f"the Redis store on Redis Cluster needs redis-py 8 or later; this is {redis.__version__}: "
                "pip install -U 'redis[hiredis]>=8'"
            )
        self.prefix = prefix if prefix is not None else ours.get("prefix", DEFAULT_PREFIX)
        if buckets is None and "buckets" in ours:
            if not ours["buckets"].isdigit() or int(ours["buckets"]) < 1:
                raise ValueError(f"invalid Redis store URL: buckets must be a whole number from 1 (got {url!r})")
            buckets = int(ours["buckets"])
        self.buckets = buckets
        self.timeout = timeout
        self.max_connections = max_connections
        self.where = redacted(self.client_url)
        self.description = (
            f"Chat history is stored in Redis at {self.where} (key prefix {self.prefix!r}) and exposed over HTTP."
        )
        self._clients: PerLoop[Calls] = PerLoop(
            lambda: open_calls(self.client_url, self.cluster, self.timeout, self.max_connections), Calls.close
        )
        self._layout: Layout | None = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.where} prefix={self.prefix!r}>"

    def _deadline(self) -> asyncio.Timeout:
        """The bound of an operation of several calls to Redis: all of them end within the store timeout."""
        return asyncio.timeout(self.timeout)

    async def _check_layout(self, calls: Calls) -> Layout:
        """Create the layout, or upgrade an older one, or refuse one this chatlab does not know."""
        wanted = self.buckets or (CLUSTER_BUCKETS if self.cluster else 1)
        meta = f"{self.prefix}meta".encode()
        version, buckets = await calls.script(scripts.SCHEMA, [meta], [SCHEMA_VERSION, wanted])
        if int(version) in UPGRADED:  # SCHEMA always answers a version
            if self.cluster and int(version) < 4:
                raise StoreError(
                    f"Redis store {self.where} prefix {self.prefix!r} has layout version {int(version)}: "
                    "upgrade it on a single server first (open it there once), then move it to the cluster"
                )
            await calls.client.hsetnx(meta, "buckets", wanted)  # concurrent upgraders agree on one count
            buckets = await calls.client.hget(meta, "buckets")
            try:
                await upgrade(calls, Layout(self.prefix, int(buckets)), int(version), self.clock())
            except Exception as exc:  # a failure here is the store's: say which
                raise StoreError(
                    f"Redis store {self.prefix!r}: upgrading to layout {SCHEMA_VERSION} failed: {exc}"
                ) from exc
            await calls.client.hset(meta, "schema_version", SCHEMA_VERSION)
        elif int(version) != SCHEMA_VERSION:
            raise StoreError(
                f"Redis store {self.where} prefix {self.prefix!r} has schema version {version.decode()}; "
                f"this chatlab reads version {SCHEMA_VERSION} (and upgrades versions 1 to 5) only"
            )
        layout = Layout(self.prefix, int(buckets))
        if self.buckets is not None and self.buckets != layout.buckets:
            raise StoreError(
                f"Redis store {self.where} prefix {self.prefix!r} was created with buckets={layout.buckets}; "
                f"open it with that count (or none) instead of {self.buckets}"
            )
        self._layout = layout
        return layout

    @contextlib.asynccontextmanager
    async def _connected(self) -> AsyncIterator[tuple[Calls, Layout]]:
        """The client and layout; redis-py and socket errors (and the timeout) become StoreError. Each call the client
        sends ends within the timeout; an operation of several calls bounds them all with :meth:`_deadline`."""
        try:
            calls = await self._clients.get()  # no I/O on a single server: connections open on first use
            layout = self._layout
            if layout is None:
                async with self._deadline():  # the check also calls redis-py's client directly, outside Calls
                    layout = await self._check_layout(calls)
            yield calls, layout
        except Exception as exc:
            if isinstance(exc, StoreError):
                raise
            message = self._failure(exc)
            if message is None:
                raise
            log.warning("%s", message)
            raise StoreError(message) from None

    def _failure(self, exc: Exception) -> str | None:
        """What a redis-py or socket error (or the deadline) says; None for any other exception."""
        import redis.exceptions

        if isinstance(exc, redis.exceptions.TimeoutError):
            return f"Redis at {self.where} timed out: {exc}"
        if isinstance(exc, TimeoutError):
            return f"Redis at {self.where} did not answer within {self.timeout:g} s (the store timeout)"
        if isinstance(exc, redis.exceptions.ConnectionError):
            return f"Redis at {self.where} is unreachable: {exc}"
        if isinstance(exc, (redis.exceptions.RedisError, OSError)):
            return f"Redis at {self.where} failed: {exc}"
        if _stream_gone(exc):
            return f"Redis at {self.where} is unreachable: a connection closed while a command was sent ({exc})"
        return None

    async def _script(
        self, script: scripts.Script, conversation_key: str, args: Sequence[Any], idempotency_key: str | None = None
    ) -> Any:
        """A script's reply on one conversation: its keys (then the idempotency record) as KEYS, its key ARGV[1]."""
        async with self._connected() as (calls, layout):
            keys = [*layout.conversation(conversation_key)]
            if idempotency_key is not None:
                keys.append(layout.idempotency(conversation_key, idempotency_key))
            return await calls.script(script, keys, [conversation_key.encode("utf-8"), *args])

    async def read(self, conversation_key: str) -> Conversation:
        """One script: one snapshot."""
        whole = await self.read_slice(conversation_key)
        return Conversation(whole.messages, whole.version)

    async def read_slice(self, conversation_key: str, after: int = 0, limit: int | None = None) -> ConversationSlice:
        """One script reading only the range asked for (``LRANGE``)."""
        check_slice(after, limit)
        # LRANGE walks from the nearer end of the list: the newest messages are cheap
        args = ["" if limit == 0 else after, -1 if limit is None else after + limit - 1]
        version, count, messages = await self._script(scripts.READ, conversation_key, args)
        return ConversationSlice(messages, after, int(count), version.decode())

    async def summaries(
        self,
        prefix: str = "",
        *,
        after: str | None = None,
        limit: int | None = None,
        tags: Mapping[str, str] | None = None,
        plain: bool = False,
    ) -> list[ConversationSummary]:
        """A merge of the buckets' pages, one script per bucket (``plain``: from each bucket's plain index): see
        :func:`_first`."""
        if limit is not None and limit <= 0:
            return []
        upper = prefix_upper_bound(prefix)  # the ZRANGEBYLEX bounds: code point order, as UTF-8's byte order
        start, inclusive = listing_start(prefix, after)
        low = (b"[" if inclusive else b"(") + start.encode("utf-8")
        high = b"+" if upper is None else b"(" + upper.encode("utf-8")
        wanted = [part for name, value in (tags or {}).items() for part in (name.encode(), value.encode())]

        async with self._connected() as (calls, layout), self._deadline():

            async def read(bucket: int, start: bytes, count: int | None) -> list[Any]:
                args = [layout.bases[bucket], start, high, "" if count is None else count, "1" if plain else ""]
                index = layout.index(bucket, plain)
                return list(await calls.script(scripts.SUMMARIES, [index], [*args, *wanted]))

            return [_summary(*row) for row in await _first(read, layout.buckets, low, limit)]

    async def set_metadata(
        self,
        conversation_key: str,
        change: MetadataChange,
        *,
        expected: Metadata | None = None,
        if_match: Collection[str] | None = None,
    ) -> ConversationSummary | None:
        """One script, over ``if_match`` and ``expected`` when given."""
        condition = [*_conditions(if_match), *_condition(expected)]
        args = [MAX_TAGS, *condition, *_patch(change.sets_title, change.title, change.tags)]
        reply: list[Any] | None = await self._script(scripts.SET_METADATA, conversation_key, args)
        if reply is None:
            return None
        if reply[0] == b"mismatch":
            raise VersionMismatch(reply[1].decode())
        if reply[0] == b"changed":
            raise _changed(reply)
        status, value = reply
        if status == b"too_many":
            raise TooManyTags(f"a conversation carries at most {MAX_TAGS} tags; this change would leave {int(value)}")
        return _summary(*value)

    def _stamps(self, written: float) -> list[str | int]:
        """The time of a write, and when the keys it writes expire, in ms (0: never)."""
        return [repr(written), 0 if self.retention is None else int((written + self.retention) * 1000)]

    async def append(
        self,
        conversation_key: str,
        messages: Sequence[EncodedMessage],
        *,
        if_match: Collection[str] | None = None,
        idempotency: Idempotency | None = None,
    ) -> WriteResult:
        """One script, which holds the append rule in Lua (held to :mod:`..append_rule`'s table of cases)."""
        batch = [bytes(m) for m in messages]
        record: list[str | int] = (
            [idempotency.fingerprint, max(1, int(idempotency.ttl * 1000))] if idempotency else ["", 0]
        )
        args: list[bytes | str | int] = [new_generation(), *record, *self._stamps(self.clock()), *_conditions(if_match)]
        args += [*scripts.authors_args(batch), *batch]
        key = idempotency.key if idempotency else None
        return _outcome(await self._script(scripts.APPEND, conversation_key, args, key), idempotency)

    async def replace(
        self, conversation_key: str, messages: Sequence[EncodedMessage], *, if_match: Collection[str] | None = None
    ) -> WriteResult:
        """One script: the check and the write are one atomic step."""
        batch = [bytes(m) for m in messages]
        args: list[bytes | str | int] = [new_version(len(batch)), *self._stamps(self.clock()), *_conditions(if_match)]
        args += [*scripts.authors_args(batch), *batch]
        return _outcome(await self._script(scripts.REPLACE, conversation_key, args))

    async def delete(self, conversation_key: str, *, if_match: Collection[str] | None = None) -> None:
        """One script: the check and the deletion are one atomic step."""
        _outcome(await self._script(scripts.DELETE, conversation_key, _conditions(if_match)))

    async def restore(self, records: Sequence[ConversationRecord]) -> None:
        """Each record in its own script, in order; the first whose conversation is elsewhere stops the rest."""
        async with self._connected() as (calls, layout), self._deadline():
            for record in records:
                key = record.conversation_key
                times = f"{record.created_at!r} {record.updated_at!r}"
                args = [key.encode(), record.expected, record.version, times, *self._stamps(record.updated_at)]
                args += [len(record.tags), *_patch(record.title is not None, record.title, record.tags)]
                args += [*_condition(record.expected_metadata), *scripts.authors_args(record.messages)]
                current = await calls.script(scripts.RESTORE, layout.conversation(key), [*args, *record.messages])
                if isinstance(current, list):
                    raise _changed(current)
                if current is not None:
                    raise VersionMismatch(current.decode())

    async def sweep(self) -> int:
        """Delete what each bucket's ``updated`` index says is due, a bounded step per script."""
        cutoff = self.cutoff()
        if cutoff is None:
            return 0

        async def one(calls: Calls, base: bytes) -> int:
            keys = [base + b"conversations", base + b"updated"]
            deleted = 0
            while True:
                count = int(await calls.script(scripts.SWEEP, keys, [cutoff, base, STEP]))
                if count == 0:
                    return deleted
                deleted += count

        async with self._connected() as (calls, layout), self._deadline():
            return sum(await asyncio.gather(*(one(calls, base) for base in layout.bases)))

    async def close(self) -> None:
        """Close the clients and their connections (a later call opens new ones)."""
        await self._clients.close()


async def _first(
    read: Callable[[int, bytes, int | None], Awaitable[list[Any]]], buckets: int, low: bytes, limit: int | None
) -> list[Any]:
    """The first ``limit`` rows (``None``: all) of the buckets in key order (a row's key first), from ``read(bucket,
    low, count)``. Each bucket is asked for twice its share of the page at once; only one whose last row comes before
    the page's last may hold more, and is read again (twice as many): about ``2 * limit`` rows, in one round."""
    by_key = itemgetter(0)  # code point order, as UTF-8's byte order
    if limit is None:
        parts = await asyncio.gather(*(read(b, low, None) for b in range(buckets)))
        return sorted((row for part in parts for row in part), key=by_key)
    size = dict.fromkeys(range(buckets), min(limit, -(-2 * limit // buckets) + 4))
    last: dict[int, bytes] = {}  # the last row read of each bucket that may hold more
    rows = []
    asking = list(range(buckets))
    while asking:
        parts = await asyncio.gather(*(read(b, b"(" + last[b] if b in last else low, size[b]) for b in asking))
        for bucket, part in zip(asking, parts, strict=True):
            rows += part
            if len(part) < size[bucket]:
                last.pop(bucket, None)  # read to its end
            else:
                last[bucket] = part[-1][0]
                size[bucket] *= 2
        rows = sorted(rows, key=by_key)[:limit]
        edge = rows[-1][0] if len(rows) == limit else None
        asking = [b for b, key in last.items() if edge is None or key < edge]
    return rows
