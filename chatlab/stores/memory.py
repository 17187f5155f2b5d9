"""The article's ``InMemoryChatHistoryStore``, in Python."""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import struct
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from dataclasses import replace as replace_fields
from itertools import islice, takewhile

from ..authors import count_authors
from ..vocabulary import is_plain
from .append_rule import Recorded, changes_nothing, decide_append
from .base import (
    ABSENT,
    ChatHistoryStore,
    Conversation,
    ConversationRecord,
    ConversationSlice,
    ConversationSummary,
    EncodedMessage,
    Idempotency,
    Metadata,
    VersionMismatch,
    WriteResult,
    check_slice,
    listing_start,
    new_version,
    version_matches,
)
from .metadata import MetadataChange


@dataclass(slots=True, eq=False)
class _Bucket:
    """One conversation, with the lock that keeps each batch contiguous."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    messages: list[EncodedMessage] = field(default_factory=list)
    version: str = ABSENT
    created_at: float = 0.0
    updated_at: float = 0.0
    title: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    participants: dict[str, int] = field(default_factory=dict)  # messages per author, kept with every write

    def summary(self, key: str) -> ConversationSummary:
        """The conversation's summary (a copy of its tags and participants)."""
        return ConversationSummary(
            key,
            len(self.messages),
            self.version,
            self.created_at,
            self.updated_at,
            self.title,
            dict(self.tags),
            dict(self.participants),
        )

    def hold(self, messages: Sequence[EncodedMessage], authors: Mapping[str, int]) -> None:
        """Make the conversation hold exactly ``messages``, whose authors signed ``authors`` of them (counted by
        the caller before it took the lock)."""
        self.messages[:] = messages
        self.participants = dict(authors)

    def add(self, messages: Sequence[EncodedMessage], authors: Mapping[str, int]) -> None:
        """Put ``messages`` after the last, adding what their authors signed (``authors``) to the participants."""
        self.messages.extend(messages)
        for author, count in authors.items():
            self.participants[author] = self.participants.get(author, 0) + count

    def forget(self) -> None:
        """Drop the messages and their participants (the conversation is absent after)."""
        self.messages.clear()
        self.participants.clear()
        self.version = ABSENT

    def touch(self, now: float) -> None:
        """Stamp a write at ``now`` (and the creation, for a new conversation)."""
        if self.version == ABSENT:
            self.created_at = now
        self.updated_at = now


class InMemoryChatHistoryStore(ChatHistoryStore):
    """History in this process's memory, lost when it stops. Thread-safe like the C# original (a
    ``ConcurrentDictionary`` of buckets, a lock per bucket); no lock is held across an ``await``, and idempotency
    records are used with the conversation's lock held."""

    description = "Chat history is stored in memory and exposed over HTTP."

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._buckets: dict[str, _Bucket] = {}
        self._keys: list[str] = []  # the keys of _buckets, sorted: what a listing pages through
        self._plain_keys: list[str] = []  # those outside every namespace, sorted: what a plain listing pages through
        self._buckets_lock = threading.Lock()
        # digest of both keys -> packed (expires at, fingerprint digest, version); the oldest at the front
        self._records: dict[bytes, bytes] = {}
        self._records_lock = threading.Lock()
        self._clock = clock

    @contextmanager
    def _bucket(self, conversation_key: str) -> Iterator[_Bucket]:
        """The conversation's bucket (a new one if none), locked and still its current one. On the way out a bucket
        left at ABSENT is dropped while still locked, so a writer waiting for it takes a new one."""
        while True:
            bucket = self._buckets.get(conversation_key)
            if bucket is None:
                with self._buckets_lock:
                    bucket = self._buckets.get(conversation_key)
                    if bucket is None:
                        bucket = self._buckets[conversation_key] = _Bucket()
                        for keys in self._indexes_of(conversation_key):
                            bisect.insort(keys, conversation_key)
            bucket.lock.acquire()
            if self._buckets.get(conversation_key) is bucket:
                break
            bucket.lock.release()
        try:
            yield bucket
        finally:
            if bucket.version == ABSENT:
                with self._buckets_lock:
                    if self._buckets.get(conversation_key) is bucket:
                        del self._buckets[conversation_key]
                        for keys in self._indexes_of(conversation_key):
                            del keys[bisect.bisect_left(keys, conversation_key)]
            bucket.lock.release()

    def _indexes_of(self, conversation_key: str) -> list[list[str]]:
        """The sorted key lists that hold ``conversation_key``: every key's, and the plain keys' if it is one."""
        return [self._keys, self._plain_keys] if is_plain(conversation_key) else [self._keys]

    async def read(self, conversation_key: str) -> Conversation:
        """One snapshot of the whole conversation, taken under its lock."""
        whole = await self.read_slice(conversation_key)
        return Conversation(whole.messages, whole.version)

    async def read_slice(self, conversation_key: str, after: int = 0, limit: int | None = None) -> ConversationSlice:
        """The range asked for, copied under the conversation's lock."""
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
        """Decided by :func:`~chatlab.stores.append_rule.decide_append` under the conversation's lock."""
        if changes_nothing(messages, if_match, idempotency):
            return WriteResult(await self.version(conversation_key))
        record_key = b""
        if idempotency is not None:
            # one digest of both keys (the service's key pattern allows no NUL in a conversation key), and the
            # fingerprint as its digest too: a record's size does not grow with theirs
            record_key = _digest(f"{conversation_key}\0{idempotency.key}")
            idempotency = replace_fields(idempotency, fingerprint=_digest(idempotency.fingerprint).hex())
        authors = count_authors(messages)  # decoded before the lock is taken
        with self._bucket(conversation_key) as bucket:  # a condition or record on an unknown key does not create it
            recorded = None if idempotency is None else self._recorded(record_key)
            decision = decide_append(
                bucket.version,
                len(bucket.messages),
                len(messages),
                if_match=if_match,
                idempotency=idempotency,
                recorded=recorded,
            )
            if decision.writes_messages:
                bucket.touch(self.clock())
                bucket.add(messages, authors)
                bucket.version = decision.version
            if decision.record is not None and idempotency is not None:
                self._record(record_key, decision.record, idempotency.ttl)
            return decision.result()

    async def replace(
        self, conversation_key: str, messages: Sequence[EncodedMessage], *, if_match: Collection[str] | None = None
    ) -> WriteResult:
        """The new messages at a new generation, under the conversation's lock."""
        authors = count_authors(messages)
        with self._bucket(conversation_key) as bucket:
            if not version_matches(bucket.version, if_match):
                raise VersionMismatch(bucket.version)
            bucket.touch(self.clock())
            bucket.hold(messages, authors)
            bucket.version = new_version(len(messages))
            return WriteResult(bucket.version)

    async def delete(self, conversation_key: str, *, if_match: Collection[str] | None = None) -> None:
        """Under the conversation's lock, once a write in progress is done."""
        with self._bucket(conversation_key) as bucket:  # waits for a write in progress to finish
            if not version_matches(bucket.version, if_match):
                raise VersionMismatch(bucket.version)
            bucket.forget()

    async def summaries(
        self,
        prefix: str = "",
        *,
        after: str | None = None,
        limit: int | None = None,
        tags: Mapping[str, str] | None = None,
        plain: bool = False,
    ) -> list[ConversationSummary]:
        """A chunk of the sorted keys (``plain``: of the sorted plain keys) at a time, each conversation read under
        its own lock."""
        # a chunk of the sorted keys at a time; buckets are locked outside the index's lock, which a writer
        # holding a bucket's lock may wait for
        result: list[ConversationSummary] = []
        wanted = (tags or {}).items()  # every wanted tag, with its value
        start, inclusive = listing_start(prefix, after)
        while True:
            with self._buckets_lock:
                keys = self._plain_keys if plain else self._keys
                at = bisect.bisect_left(keys, start) if inclusive else bisect.bisect_right(keys, start)
                chunk = [(k, self._buckets[k]) for k in keys[at : at + _CHUNK]]
            for key, bucket in chunk:
                if not key.startswith(prefix) or len(result) == limit:
                    return result
                with bucket.lock:
                    # a bucket at ABSENT is being created by a write that may still fail
                    if bucket.version != ABSENT and all(bucket.tags.get(name) == value for name, value in wanted):
                        result.append(bucket.summary(key))
            if len(chunk) < _CHUNK:
                return result
            start, inclusive = chunk[-1][0], False
            await asyncio.sleep(0)  # a long listing lets the event loop serve other requests between chunks

    async def set_metadata(
        self,
        conversation_key: str,
        change: MetadataChange,
        *,
        expected: Metadata | None = None,
        if_match: Collection[str] | None = None,
    ) -> ConversationSummary | None:
        """Under the conversation's lock, over ``if_match`` and ``expected`` when given."""
        with self._bucket(conversation_key) as bucket:
            if not version_matches(bucket.version, if_match):
                raise VersionMismatch(bucket.version)
            if bucket.version == ABSENT:
                return None
            if expected is not None:
                expected.check(bucket.title, bucket.tags)
            bucket.title, bucket.tags = change.applied(bucket.title, bucket.tags)
            return bucket.summary(conversation_key)

    def totals(self) -> tuple[int, int]:
        """How many conversations and messages the store holds (for metrics)."""
        with self._buckets_lock:
            buckets = list(self._buckets.values())
        held = [len(b.messages) for b in buckets if b.version != ABSENT]
        return len(held), sum(held)

    async def restore(self, records: Sequence[ConversationRecord]) -> None:
        """Each record in turn, under its conversation's lock."""
        for record in records:
            authors = count_authors(record.messages)
            with self._bucket(record.conversation_key) as bucket:
                if bucket.version != record.expected:
                    raise VersionMismatch(bucket.version)
                if record.expected_metadata is not None:
                    record.expected_metadata.check(bucket.title, bucket.tags)
                bucket.hold(record.messages, authors)
                bucket.version = record.version
                bucket.title = record.title
                bucket.tags = dict(record.tags)
                bucket.created_at = record.created_at
                bucket.updated_at = record.updated_at

    async def sweep(self) -> int:
        """Those last written at or before the cutoff and not written since."""
        cutoff = self.cutoff()
        if cutoff is None:
            return 0
        with self._buckets_lock:
            due = [k for k, b in self._buckets.items() if b.updated_at <= cutoff]
        deleted = 0
        for key in due:
            with self._bucket(key) as bucket:
                if bucket.version != ABSENT and bucket.updated_at <= cutoff:  # not written meanwhile
                    bucket.forget()
                    deleted += 1
        return deleted

    def _recorded(self, key: bytes) -> Recorded | None:
        """The live record under ``key`` (its fingerprint is the digest of the request's)."""
        with self._records_lock:
            record = self._records.get(key)
        if record is None or _EXPIRES.unpack_from(record)[0] <= self._clock():
            return None
        return Recorded(record[_EXPIRES.size : _VERSION_AT].hex(), record[_VERSION_AT:].decode())

    def _record(self, key: bytes, record: Recorded, ttl: float) -> None:
        now = self._clock()
        with self._records_lock:
            self._records.pop(key, None)  # re-insert at the end
            self._records[key] = _EXPIRES.pack(now + ttl) + bytes.fromhex(record.fingerprint) + record.version.encode()
            # drop expired records from the front, stopping at the first live one: usually one look, not a scan
            expired = takewhile(lambda item: _EXPIRES.unpack_from(item[1])[0] <= now, self._records.items())
            for k, _ in list(islice(expired, _EXPIRED_PER_WRITE)):
                del self._records[k]


_CHUNK = 256  # keys a listing takes from the sorted index per hold of its lock
_EXPIRED_PER_WRITE = 64  # dropped by one write at most: more than the one it adds, so they never pile up

# A record holds 128-bit digests, not copies, so its size does not grow with the keys' lengths.
_EXPIRES = struct.Struct("<d")
_VERSION_AT = _EXPIRES.size + 16


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=16).digest()
