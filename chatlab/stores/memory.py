"""The article's ``InMemoryChatHistoryStore``, in Python."""

from __future__ import annotations

import bisect
import hashlib
import struct
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence

from .base import (
    ABSENT,
    ChatHistoryStore,
    Conversation,
    ConversationRecord,
    ConversationSlice,
    ConversationSummary,
    EncodedMessage,
    Idempotency,
    IdempotencyKeyReused,
    VersionMismatch,
    WriteResult,
    appended_version,
    check_slice,
    has_tags,
    new_version,
    version_matches,
)
from .metadata import MetadataChange


class _Bucket:
    """One conversation: its messages, its version, when it was created and last written, its title and tags,
    and the lock that keeps each batch contiguous."""

    __slots__ = ("created_at", "lock", "messages", "tags", "title", "updated_at", "version")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.messages: list[EncodedMessage] = []
        self.version = ABSENT
        self.created_at = 0.0
        self.updated_at = 0.0
        self.title: str | None = None
        self.tags: dict[str, str] = {}

    def summary(self, conversation_key: str) -> ConversationSummary:
        """The conversation's summary (call with the lock held)."""
        return ConversationSummary(
            conversation_key,
            len(self.messages),
            self.version,
            self.created_at,
            self.updated_at,
            self.title,
            dict(self.tags),
        )

    def touch(self, now: float) -> None:
        """Record a write at ``now`` (the creation too, for a conversation that did not exist)."""
        if self.version == ABSENT:
            self.created_at = now
        self.updated_at = now


class InMemoryChatHistoryStore(ChatHistoryStore):
    """History in this process's memory, lost when it stops.

    Like the C# original (a ``ConcurrentDictionary`` of buckets, a lock per bucket) it is
    thread-safe, so one store can serve several servers or threads at once. No lock is
    held across an ``await``. Idempotency records are kept in a dict of their own (taken
    only while the conversation's lock is held, so a check and its write are one step),
    each of a fixed size whatever the keys' lengths (digests: :func:`_record_key`, :func:`_pack`).
    """

    description = "Chat history is stored in memory and exposed over HTTP."

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._buckets: dict[str, _Bucket] = {}
        self._keys: list[str] = []  # the keys of _buckets, sorted: what a listing pages through
        self._buckets_lock = threading.Lock()
        # digest of (conversation key, idempotency key) -> packed (expires at, fingerprint digest, version);
        # insertion ordered, so the oldest records are at the front
        self._records: dict[bytes, bytes] = {}
        self._records_lock = threading.Lock()
        self._clock = clock

    def _bucket(self, conversation_key: str) -> _Bucket:
        bucket = self._buckets.get(conversation_key)
        if bucket is None:
            with self._buckets_lock:
                bucket = self._buckets.get(conversation_key)
                if bucket is None:
                    bucket = self._buckets[conversation_key] = _Bucket()
                    bisect.insort(self._keys, conversation_key)
        return bucket

    def _locked_bucket(self, conversation_key: str) -> _Bucket:
        """The conversation's bucket, locked, and still the current one (not deleted meanwhile)."""
        while True:
            bucket = self._bucket(conversation_key)
            bucket.lock.acquire()
            if self._buckets.get(conversation_key) is bucket:
                return bucket
            bucket.lock.release()

    def _unlock(self, conversation_key: str, bucket: _Bucket) -> None:
        """Release a bucket from :meth:`_locked_bucket`, dropping it first if it holds no conversation.

        A refused write on an unknown key or a delete leaves the bucket at :data:`ABSENT`; it is
        dropped while still locked, so a writer waiting for the lock finds it gone and takes a new
        bucket instead of writing into one that is no longer the conversation's.
        """
        try:
            if bucket.version == ABSENT:
                with self._buckets_lock:
                    if self._buckets.get(conversation_key) is bucket:
                        del self._buckets[conversation_key]
                        del self._keys[bisect.bisect_left(self._keys, conversation_key)]
        finally:
            bucket.lock.release()

    async def read(self, conversation_key: str) -> Conversation:
        bucket = self._buckets.get(conversation_key)
        if bucket is None:
            return Conversation([], ABSENT)
        with bucket.lock:
            return Conversation(bucket.messages.copy(), bucket.version)

    async def read_slice(self, conversation_key: str, after: int = 0, limit: int | None = None) -> ConversationSlice:
        check_slice(after, limit)
        bucket = self._buckets.get(conversation_key)
        if bucket is None:
            return ConversationSlice([], after, 0, ABSENT)
        end = None if limit is None else after + limit
        with bucket.lock:
            return ConversationSlice(bucket.messages[after:end], after, len(bucket.messages), bucket.version)

    async def append(
        self,
        conversation_key: str,
        messages: Sequence[EncodedMessage],
        *,
        if_match: Collection[str] | None = None,
        idempotency: Idempotency | None = None,
    ) -> WriteResult:
        if not messages and if_match is None and idempotency is None:
            return WriteResult(await self.version(conversation_key))
        bucket = self._locked_bucket(conversation_key)
        record_key = _record_key(conversation_key, idempotency.key) if idempotency is not None else b""
        try:
            if idempotency is not None:
                recorded = self._recorded(record_key, idempotency)
                if recorded is not None:
                    return recorded
            if not version_matches(bucket.version, if_match):
                raise VersionMismatch(bucket.version)
            if messages:
                bucket.touch(self.clock())
                bucket.messages.extend(messages)
                bucket.version = appended_version(bucket.version, len(bucket.messages))
            if idempotency is not None:
                self._record(record_key, idempotency, bucket.version)
            return WriteResult(bucket.version)
        finally:
            self._unlock(conversation_key, bucket)  # a condition or record on an unknown key must not create it

    async def replace(
        self, conversation_key: str, messages: Sequence[EncodedMessage], *, if_match: Collection[str] | None = None
    ) -> WriteResult:
        bucket = self._locked_bucket(conversation_key)
        try:
            if not version_matches(bucket.version, if_match):
                raise VersionMismatch(bucket.version)
            bucket.touch(self.clock())
            bucket.messages[:] = messages
            bucket.version = new_version(len(messages))
            return WriteResult(bucket.version)
        finally:
            self._unlock(conversation_key, bucket)

    async def delete(self, conversation_key: str, *, if_match: Collection[str] | None = None) -> None:
        bucket = self._locked_bucket(conversation_key)  # waits for a write in progress to finish
        try:
            if not version_matches(bucket.version, if_match):
                raise VersionMismatch(bucket.version)
            bucket.messages.clear()
            bucket.version = ABSENT
        finally:
            self._unlock(conversation_key, bucket)

    async def summaries(
        self,
        prefix: str = "",
        *,
        after: str | None = None,
        limit: int | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> list[ConversationSummary]:
        """A walk along the sorted keys from ``after`` (or ``prefix``), a chunk at a time: the buckets are
        checked outside the index's lock, since a writer holding a bucket's lock may wait for the index's."""
        result: list[ConversationSummary] = []
        start = prefix if after is None or after < prefix else after
        inclusive = after is None or after < prefix
        while limit is None or len(result) < limit:
            with self._buckets_lock:
                keys = self._keys
                at = bisect.bisect_left(keys, start) if inclusive else bisect.bisect_right(keys, start)
                chunk = [(k, self._buckets[k]) for k in keys[at : at + _CHUNK]]
            for key, bucket in chunk:
                if not key.startswith(prefix):
                    return result
                with bucket.lock:
                    # a bucket at ABSENT is being created by a write that may still fail
                    if bucket.version != ABSENT and has_tags(bucket.tags, tags):
                        result.append(bucket.summary(key))
                if limit is not None and len(result) == limit:
                    return result
            if len(chunk) < _CHUNK:
                return result
            start, inclusive = chunk[-1][0], False
        return result

    async def set_metadata(self, conversation_key: str, change: MetadataChange) -> ConversationSummary | None:
        bucket = self._locked_bucket(conversation_key)
        try:
            if bucket.version == ABSENT:
                return None
            bucket.title, bucket.tags = change.applied(bucket.title, bucket.tags)
            return bucket.summary(conversation_key)
        finally:
            self._unlock(conversation_key, bucket)

    def totals(self) -> tuple[int, int]:
        """How many conversations and messages the store holds (for metrics: cheap here, no lock held long)."""
        with self._buckets_lock:
            buckets = list(self._buckets.values())
        held = [len(b.messages) for b in buckets if b.version != ABSENT]
        return len(held), sum(held)

    async def restore(self, records: Sequence[ConversationRecord]) -> None:
        for record in records:
            bucket = self._locked_bucket(record.conversation_key)
            try:
                if bucket.version != record.expected:
                    raise VersionMismatch(bucket.version)
                bucket.messages[:] = record.messages
                bucket.version = record.version
                bucket.title, bucket.tags = record.title, dict(record.tags)
                bucket.created_at, bucket.updated_at = record.created_at, record.updated_at
            finally:
                self._unlock(record.conversation_key, bucket)

    async def sweep(self) -> int:
        """A pass over every conversation: those last written at or before the cutoff are deleted."""
        cutoff = self.cutoff()
        if cutoff is None:
            return 0
        with self._buckets_lock:
            due = [k for k, b in self._buckets.items() if b.updated_at <= cutoff]
        deleted = 0
        for key in due:
            bucket = self._locked_bucket(key)
            try:
                if bucket.version != ABSENT and bucket.updated_at <= cutoff:  # not written meanwhile
                    bucket.messages.clear()
                    bucket.version = ABSENT
                    deleted += 1
            finally:
                self._unlock(key, bucket)
        return deleted

    # -- idempotency records (called with the conversation's lock held) ----------------

    def _recorded(self, key: bytes, idempotency: Idempotency) -> WriteResult | None:
        """The answer recorded under ``key`` (:func:`_record_key`) for this request, if any."""
        with self._records_lock:
            record = self._records.get(key)
        if record is None:
            return None
        expires, fingerprint, version = _unpack(record)
        if expires <= self._clock():
            return None
        if fingerprint != _digest(idempotency.fingerprint):
            raise IdempotencyKeyReused(idempotency.key)
        return WriteResult(version, replayed=True)

    def _record(self, key: bytes, idempotency: Idempotency, version: str) -> None:
        now = self._clock()
        with self._records_lock:
            self._records.pop(key, None)  # re-insert at the end
            self._records[key] = _pack(now + idempotency.ttl, _digest(idempotency.fingerprint), version)
            # drop expired records from the front, oldest first, stopping at the first live one (with equal
            # TTLs the rest are younger): usually one look, not a scan
            expired: list[bytes] = []
            for k, record in self._records.items():
                if _EXPIRES.unpack_from(record)[0] > now or len(expired) == EXPIRED_PER_WRITE:
                    break
                expired.append(k)
            for k in expired:
                del self._records[k]


_CHUNK = 256
"""How many keys a listing takes from the sorted index per hold of its lock."""

EXPIRED_PER_WRITE = 64
"""At most this many expired records are dropped by one write: more than the one record a write adds, so they
never pile up, and a write after a long quiet spell does a bounded amount of work."""

# An idempotency record holds digests, not copies: 16 bytes stand for a conversation key and an
# idempotency key of any length (up to 128 + 255 characters), 16 more for the request's fingerprint.
# A collision of two 128-bit digests is not a risk at any number of records a process can hold.
_DIGEST_SIZE = 16
_EXPIRES = struct.Struct("<d")


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=_DIGEST_SIZE).digest()


def _record_key(conversation_key: str, idempotency_key: str) -> bytes:
    """One digest of both keys (a conversation key holds no NUL: the service's key pattern allows none)."""
    return _digest(f"{conversation_key}\0{idempotency_key}")


def _pack(expires: float, fingerprint: bytes, version: str) -> bytes:
    """One bytes object for a record: when it expires, the request's fingerprint digest, the version it answered."""
    return _EXPIRES.pack(expires) + fingerprint + version.encode()


def _unpack(record: bytes) -> tuple[float, bytes, str]:
    (expires,) = _EXPIRES.unpack_from(record)
    end = _EXPIRES.size + _DIGEST_SIZE
    return expires, record[_EXPIRES.size : end], record[end:].decode()
