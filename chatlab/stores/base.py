"""The store interface the chat history service is written against; what every store guarantees: docs/stores.md.

A store keeps each message as the UTF-8 JSON bytes the service produced, so a read never re-encodes anything.
Versions (``"<generation>.<count>"``: appends keep the generation, a replace or a delete ends it) and idempotency
records live in the store, so that checking them and writing are one atomic step."""

from __future__ import annotations

import json
import secrets
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

# the names other modules take from here, re-exported explicitly
from ..vocabulary import ABSENT as ABSENT
from ..vocabulary import ConversationSummary as ConversationSummary
from ..vocabulary import Version
from .metadata import MetadataChange as MetadataChange

EncodedMessage = bytes
"""One chat message as compact UTF-8 JSON (the article's ``ChatMessage`` wire format)."""

ANY = "*"  # in if_match: any version, as long as the conversation exists (HTTP If-Match: *)


def new_generation() -> str:
    """A new random generation: the part of a version that a replace or a delete ends."""
    return secrets.token_hex(8)


def new_version(count: int = 0) -> str:
    """The version of a conversation just created or replaced with ``count`` messages: a new generation."""
    return str(Version(new_generation(), count))


def appended_version(current: str, count: int) -> str:
    """The version after an append brings a conversation at ``current`` to ``count`` messages (same generation;
    a bare token, written before versions had a count, becomes the generation)."""
    parsed = Version.parse(current)
    if parsed is None:
        return str(Version(current, count))
    return new_version(count) if parsed.generation is None else str(Version(parsed.generation, count))


def version_matches(current: str, if_match: Collection[str] | None) -> bool:
    """Whether a conversation at ``current`` satisfies ``if_match`` (``None``: no condition)."""
    return if_match is None or current in if_match or (ANY in if_match and current != ABSENT)


def json_object(values: Mapping[str, str] | Mapping[str, int]) -> str:
    """Tags or participants as the compact JSON object the SQL stores keep (non-ASCII kept as it is)."""
    return json.dumps(dict(values), ensure_ascii=False, separators=(",", ":"))


def prefix_upper_bound(prefix: str) -> str | None:
    """The least string above every string starting with ``prefix`` in code point order (``None``: none)."""
    prefix = prefix.rstrip("\U0010ffff")  # no character follows the last one
    if not prefix:
        return None
    last = ord(prefix[-1]) + 1
    if 0xD800 <= last <= 0xDFFF:
        last = 0xE000  # surrogates are not text
    return prefix[:-1] + chr(last)


def listing_start(prefix: str, after: str | None) -> tuple[str, bool]:
    """Where a listing starts, and whether that key itself is in it: the higher of ``prefix`` (inclusive) and
    ``after`` (exclusive)."""
    if after is not None and after >= prefix:
        return after, False
    return prefix, True


@dataclass(frozen=True, slots=True)
class Metadata:
    """A conversation's title and tags as a condition of a write: it is made only if the conversation carries exactly
    these (a migration's copy, which must not undo a ``PATCH`` made on the target meanwhile)."""

    title: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)

    def check(self, title: str | None, tags: Mapping[str, str]) -> None:
        """Raise :class:`MetadataChanged` unless the conversation's ``title`` and ``tags`` are these."""
        if title != self.title or dict(tags) != dict(self.tags):
            raise MetadataChanged(title, dict(tags))


@dataclass(frozen=True, slots=True)
class ConversationRecord:
    """A whole conversation for :meth:`ChatHistoryStore.restore`; ``expected``: the version the target must be at,
    ``expected_metadata`` (if given) the title and tags it must carry."""

    conversation_key: str
    messages: list[EncodedMessage]
    version: str
    created_at: float
    updated_at: float
    expected: str = ABSENT
    title: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    expected_metadata: Metadata | None = None


@dataclass(frozen=True, slots=True)
class Conversation:
    """A consistent snapshot: the messages and their version."""

    messages: list[EncodedMessage]
    version: str


@dataclass(frozen=True, slots=True)
class ConversationArray:
    """A consistent snapshot as a read answers it: the messages as one JSON array, how many, their version."""

    array: bytes
    count: int
    version: str


@dataclass(frozen=True, slots=True)
class ConversationSlice:
    """One snapshot of the messages from position ``start`` on, with the whole conversation's count and version."""

    messages: list[EncodedMessage]
    start: int
    count: int
    version: str


@dataclass(frozen=True, slots=True)
class WriteResult:
    """What a write made: the conversation's version after it; ``replayed``: an idempotent retry's first answer."""

    version: str
    replayed: bool = False


@dataclass(frozen=True, slots=True)
class Idempotency:
    """An idempotency key for one append: ``key`` as the client sent it, ``fingerprint`` of the request."""

    key: str
    fingerprint: str
    ttl: float = 24 * 3600.0


def check_slice(after: int, limit: int | None) -> None:
    """Refuse a negative ``after`` or ``limit`` of a slice (:class:`ValueError`)."""
    if after < 0 or (limit is not None and limit < 0):
        raise ValueError(f"after and limit must be 0 or more (got after={after}, limit={limit})")


async def summary_of(store: ChatHistoryStore, key: str) -> ConversationSummary | None:
    """One conversation's summary (``None``: none): the first key starting with ``key`` is ``key`` if it exists."""
    listed = await store.summaries(key, limit=1)
    return listed[0] if listed and listed[0].conversation_key == key else None


class StoreError(Exception):
    """The store could not do its job (database down, timeout); the service answers 503."""


class VersionMismatch(Exception):
    """``if_match`` did not hold: nothing was written. ``current`` is the conversation's version."""

    def __init__(self, current: str) -> None:
        super().__init__(f"the conversation is at version {current!r}")
        self.current = current


class IdempotencyKeyReused(Exception):
    """The idempotency key was used before for a different request: nothing was written."""


class MetadataChanged(Exception):
    """The conversation's title and tags were not the expected ones (:class:`Metadata`): nothing was written.
    ``title`` and ``tags``: what it carries."""

    def __init__(self, title: str | None, tags: dict[str, str]) -> None:
        super().__init__(f"the conversation's title and tags changed (now {title!r} and {tags!r})")
        self.title = title
        self.tags = tags


class ChatHistoryStore(ABC):
    """Keeps an ordered list of encoded messages per conversation key, with a version. An append's batch is stored
    atomically and contiguously; the ``if_match`` check, the write and the idempotency record are one atomic step."""

    #: One line for ``GET /``: where this store keeps the history.
    description: str = "Chat history store."

    #: Seconds a conversation is kept after its last write (``None``: forever); see :meth:`sweep`, docs/stores.md.
    retention: float | None = None

    #: Seconds since the epoch: the time of writes (timestamps) and of retention. Tests replace it.
    clock: Callable[[], float] = staticmethod(time.time)

    def cutoff(self) -> float | None:
        """Conversations last written at or before this time are due for deletion (``None``: none are)."""
        return None if self.retention is None else self.clock() - self.retention

    async def get(self, conversation_key: str) -> list[EncodedMessage]:
        """The messages of a conversation in order; ``[]`` for an unknown key."""
        return (await self.read(conversation_key)).messages

    @abstractmethod
    async def read(self, conversation_key: str) -> Conversation:
        """The messages and version of a conversation, as one snapshot (``[]``/:data:`ABSENT` if unknown)."""

    async def read_array(self, conversation_key: str) -> ConversationArray:
        """:meth:`read` with the messages joined into the JSON array a ``GET`` answers (one snapshot)."""
        conversation = await self.read(conversation_key)
        messages = conversation.messages
        return ConversationArray(b"[" + b",".join(messages) + b"]", len(messages), conversation.version)

    async def version(self, conversation_key: str) -> str:
        """The conversation's version alone, from a slice of no messages."""
        return (await self.read_slice(conversation_key, 0, 0)).version

    async def read_slice(self, conversation_key: str, after: int = 0, limit: int | None = None) -> ConversationSlice:
        """The messages after the first ``after`` (at most ``limit``), the count and the version, as one snapshot.
        Stores read only the range asked for; this default reads everything and slices."""
        check_slice(after, limit)
        conversation = await self.read(conversation_key)
        end = None if limit is None else after + limit
        return ConversationSlice(
            conversation.messages[after:end], after, len(conversation.messages), conversation.version
        )

    @abstractmethod
    async def append(
        self,
        conversation_key: str,
        messages: Sequence[EncodedMessage],
        *,
        if_match: Collection[str] | None = None,
        idempotency: Idempotency | None = None,
    ) -> WriteResult:
        """Add a batch at the end of a conversation, creating it if needed. An empty batch writes nothing and keeps
        the version (its condition and idempotency record still count)."""

    @abstractmethod
    async def replace(
        self, conversation_key: str, messages: Sequence[EncodedMessage], *, if_match: Collection[str] | None = None
    ) -> WriteResult:
        """Make the conversation hold exactly ``messages`` (an empty list keeps an empty conversation)."""

    @abstractmethod
    async def delete(self, conversation_key: str, *, if_match: Collection[str] | None = None) -> None:
        """Forget a conversation (an unknown key is not an error); idempotency records stay. ``if_match`` is checked
        in the same atomic step, so a client never wipes an append made since it read."""

    @abstractmethod
    async def summaries(
        self,
        prefix: str = "",
        *,
        after: str | None = None,
        limit: int | None = None,
        tags: Mapping[str, str] | None = None,
        plain: bool = False,
    ) -> list[ConversationSummary]:
        """The conversations whose key starts with ``prefix``, after ``after`` (:func:`listing_start`), in key
        order, at most ``limit``, carrying every tag in ``tags``; ``plain``: only keys outside every namespace
        (:func:`~chatlab.vocabulary.is_plain`), a keyless service's conversations. Stores read the page from an index
        ordered by key, never the whole list, and a plain page from an index of plain keys alone: what other
        namespaces hold costs it nothing."""

    @abstractmethod
    async def set_metadata(
        self,
        conversation_key: str,
        change: MetadataChange,
        *,
        expected: Metadata | None = None,
        if_match: Collection[str] | None = None,
    ) -> ConversationSummary | None:
        """Make ``change`` to a conversation's title and tags, atomically; its summary after, or ``None`` (and
        nothing written) if there is no such conversation. Raises :class:`VersionMismatch` unless it satisfies
        ``if_match`` (checked in the same atomic step, so a ``PATCH`` never lands on a version its client did not
        see), :class:`~chatlab.stores.metadata.TooManyTags`, and :class:`MetadataChanged` if ``expected`` is given
        and the conversation carries other metadata."""

    @abstractmethod
    async def restore(self, records: Sequence[ConversationRecord]) -> None:
        """Write whole conversations with their own version and timestamps (a migration's copy), each only if at
        ``record.expected`` (else :class:`VersionMismatch`) and carrying ``record.expected_metadata`` when given (else
        :class:`MetadataChanged`); SQL stores write a batch in one transaction."""

    @abstractmethod
    async def sweep(self) -> int:
        """Delete every conversation last written at or before :meth:`cutoff`; how many were deleted."""

    async def ping(self) -> None:
        """Raise :class:`StoreError` unless the store answers (``/readyz``)."""
        await self.version("chatlab:ping")

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""
