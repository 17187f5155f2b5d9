"""The provider's per-conversation cache: what it already loaded, and the version it was at.

A version (``ETag``, :class:`chatlab.vocabulary.Version`) is ``"<generation>.<count>"``; within one generation a
conversation only grows, so the first ``count`` messages stay what they were. The cache holds the first ``N`` of
generation ``g`` and asks for the messages after ``N``: the answer continues them exactly when its version is ``g.M``
with ``M = N + len(answer)``; anything else (replaced, deleted, or no version) reloads the whole conversation. The
same check adds the provider's own appends without reading them back.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import overload

from agent_framework import Message

from ..vocabulary import Version
from .codec import messages_from_meai, messages_to_meai
from .http import AsyncChatHistoryClient
from .operations import encode_messages

__all__ = ["CachedHistory", "HistoryCache", "HistoryView"]

log = logging.getLogger(__name__)


class HistoryView(Sequence[Message]):
    """The first ``count`` messages of a list that only grows at its end: a snapshot without a copy, so a turn
    costs the same however long the cached conversation (the framework only reads it)."""

    __slots__ = ("_count", "_messages")

    def __init__(self, messages: list[Message], count: int) -> None:
        self._messages = messages
        self._count = count

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return self._messages[slice(*index.indices(self._count))]
        position = index + self._count if index < 0 else index
        if not 0 <= position < self._count:
            raise IndexError("history index out of range")
        return self._messages[position]

    def __iter__(self) -> Iterator[Message]:
        return itertools.islice(self._messages, self._count)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(other) == self._count and all(a == b for a, b in zip(self, other, strict=False))

    def __repr__(self) -> str:
        return repr(list(self))


@dataclass(slots=True)
class CachedHistory:
    """The first ``count`` messages of ``generation`` (``messages`` may be longer: later entries extend it)."""

    generation: str | None
    count: int
    messages: list[Message]

    def view(self) -> HistoryView:
        return HistoryView(self.messages, self.count)


class HistoryCache:
    """Up to ``size`` conversations (least recently used go first; ``0``: every read is a full one, as in the
    article), kept current through ``client``: a read fetches only what is new. Not shared between threads."""

    def __init__(self, client: AsyncChatHistoryClient, size: int) -> None:
        self.client = client
        self.size = size
        self._entries: OrderedDict[str, CachedHistory] = OrderedDict()

    async def load(self, key: str) -> Sequence[Message]:
        """The whole conversation: what is cached plus what is new, or one full read."""
        entry = self._get(key)
        if entry is not None:
            page = await self.client.read_after(key, entry.count)
            if page.version is not None and page.version.continues(entry.generation, entry.count, len(page.messages)):
                added = messages_from_meai(page.messages)
                extended = self._extend(key, entry, page.version, added)
                return extended.view() if extended else [*entry.view(), *added]  # else: updated meanwhile
            log.debug("conversation %s changed beyond appends (version %s): loading all of it", key, page.version)
        page = await self.client.read(key)
        messages = messages_from_meai(page.messages)
        if page.version is None or page.version.count != len(messages):
            self._entries.pop(key, None)
            return messages
        fresh = CachedHistory(page.version.generation, page.version.count, messages)
        self._put(key, fresh)
        return fresh.view()

    async def append(self, key: str, messages: Sequence[Message]) -> Version | None:
        """Append in one request and return the new version; cached when it proves nobody wrote in between."""
        body = encode_messages(messages_to_meai(messages))  # encode first: a bad message sends nothing
        entry = self._get(key)
        version = await self.client.append(key, body)
        if entry is not None:  # the cache gets exactly what a reader will decode
            self._extend(key, entry, version, messages_from_meai(json.loads(body)))
        return version

    async def replace(self, key: str, messages: Sequence[Message]) -> None:
        """Replace the conversation; the next read loads it whole."""
        body = encode_messages(messages_to_meai(messages))
        self._entries.pop(key, None)
        try:
            await self.client.replace(key, body)
        finally:
            self._entries.pop(key, None)

    def _get(self, key: str) -> CachedHistory | None:
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def _put(self, key: str, entry: CachedHistory) -> None:
        if self.size <= 0:
            return
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def _extend(
        self, key: str, expected: CachedHistory, version: Version | None, added: list[Message]
    ) -> CachedHistory | None:
        """``expected`` plus ``added`` (its list extended in place) when ``version`` proves it, the key unchanged."""
        if version is None or not version.continues(expected.generation, expected.count, len(added)):
            return None
        if self._entries.get(key) is not expected:
            return None
        messages = expected.messages
        if len(messages) != expected.count:  # not the end of its list (never, while entries are used as here)
            messages = messages[: expected.count]
        messages.extend(added)
        entry = CachedHistory(version.generation, version.count, messages)
        self._put(key, entry)
        return entry
