"""What the Redis store does beyond reads and writes: timestamps, retention, migration's restore, upgrades.

Layout version 3 (see :mod:`chatlab.stores.redis`) keeps ``{prefix}times:{key}`` (``"<created>
<updated>"``) and the sorted set ``{prefix}updated`` (key -> last write). Retention is done twice,
on purpose: every write sets the conversation's keys to expire ``retention`` after it (Redis's own
expiry, refreshed on each write, frees them even when no service runs), and :meth:`sweep` deletes
what ``{prefix}updated`` says is due, index entry included, by the store's clock.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from . import redis_scripts as scripts
from .base import ConversationRecord, ConversationSummary, StoreError, VersionMismatch

if TYPE_CHECKING:
    from .redis_connections import RedisPool


def summary(key: bytes, count: int, version: bytes, times: bytes) -> ConversationSummary:
    """One conversation of the summaries script: key, count, version, ``"created updated"`` (``""``: unknown)."""
    created, _, updated = times.decode().partition(" ")
    return ConversationSummary(
        key.decode("utf-8"),
        int(count),
        version.decode(),
        float(created) if created else None,
        float(updated) if updated else None,
    )


class RedisOperations:
    """Mixed into :class:`~chatlab.stores.redis.RedisChatHistoryStore` (whose attributes it uses)."""

    # provided by the store
    prefix: str
    retention: float | None
    _index_key: str
    _updated_key: str
    _list_prefix: str
    _version_prefix: str
    _times_prefix: str

    clock: Callable[[], float]
    cutoff: Callable[[], float | None]
    _guard: Callable[[Any], Awaitable[Any]]
    _list_key: Callable[[str], bytes]
    _version_key: Callable[[str], bytes]
    _times_key: Callable[[str], bytes]

    def _conversation_keys(self, conversation_key: str) -> list[Any]:
        """KEYS of the replace and delete scripts: index, list, version, times, updated."""
        return [
            self._index_key,
            self._list_key(conversation_key),
            self._version_key(conversation_key),
            self._times_key(conversation_key),
            self._updated_key,
        ]

    def _expire_at(self, written: float) -> int:
        """When the keys of a conversation written at ``written`` expire, in ms (0: never)."""
        return 0 if self.retention is None else int((written + self.retention) * 1000)

    def _write_times(self) -> list[str | int]:
        """``now`` and ``expire at`` of a write happening now."""
        now = self.clock()
        return [repr(now), self._expire_at(now)]

    async def restore(self, records: Sequence[ConversationRecord]) -> None:
        async def work(pool: RedisPool) -> None:
            for record in records:
                key = record.conversation_key
                keys = self._conversation_keys(key)
                times = f"{record.created_at!r} {record.updated_at!r}"
                args: list[Any] = [key.encode(), record.expected, record.version, times, repr(record.updated_at)]
                args.append(str(self._expire_at(record.updated_at)))
                current = await pool.script(scripts.RESTORE, keys, [*args, *record.messages])
                if current is not None:
                    raise VersionMismatch(current.decode())

        await self._guard(work)

    async def sweep(self) -> int:
        cutoff = self.cutoff()
        if cutoff is None:
            return 0
        prefixes = (self._list_prefix, self._version_prefix, self._times_prefix)

        async def work(pool: RedisPool) -> int:
            deleted = 0
            while count := int(
                await pool.script(scripts.SWEEP, [self._index_key, self._updated_key], [cutoff, *prefixes])
            ):
                deleted += count
            return deleted

        result: int = await self._guard(work)
        return result

    async def _upgrade_to_3(self, pool: RedisPool) -> None:
        """Give every conversation of an older layout times (now) and a place in ``{prefix}updated``."""
        now, offset = repr(self.clock()), 0
        try:
            while count := int(
                await pool.script(
                    scripts.UPGRADE, [self._index_key, self._updated_key], [now, self._times_prefix, offset]
                )
            ):
                offset += count
        except Exception as exc:  # a failure here is the store's: say which
            raise StoreError(f"Redis store {self.prefix!r}: upgrading to layout 3 failed: {exc}") from exc
