"""The provider's per-conversation cache: what it already loaded, and the version it was at.

Within one generation (:class:`chatlab.vocabulary.Version`) a conversation only grows. Holding the first ``N``
messages of generation ``g``, the cache asks for those after ``N``: the answer continues them exactly when its version
is ``g.M`` with ``M = N + len(answer)``; anything else reloads it all. The same check adds the provider's own appends.
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
from .tracing import note_read

__all__ = ["CachedHistory", "HistoryCache"]

log = logging.getLogger(__name__)


@dataclass(slots=True, eq=False, repr=False)
class CachedHistory(Sequence[Message]):
    """The first ``length`` messages of ``generation``: a snapshot without a copy, as ``messages`` only grows at its end
    (later entries extend the same list)."""

    generation: str | None
    length: int
    messages: list[Message]

    def __len__(self) -> int:
        return self.length

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return self.messages[slice(*index.indices(self.length))]
        return self.messages[range(self.length)[index]]  # range checks the bounds, and counts a negative from the end

    def __iter__(self) -> Iterator[Message]:
        return itertools.islice(self.messages, self.length)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(other) == self.length and all(a == b for a, b in zip(self, other, strict=False))

    def __repr__(self) -> str:
        return repr(list(self))


class HistoryCache:
    """Up to ``size`` conversations, least recently used first out (``0``: none). Not shared between threads."""

    def __init__(self, client: AsyncChatHistoryClient, size: int) -> None:
        self.client = client
        self.size = size
        self._entries: OrderedDict[str, CachedHistory] = OrderedDict()

    async def load(self, key: str) -> Sequence[Message]:
        """The whole conversation: what is cached plus what is new, else one full read."""
        entry = self._get(key)
        if entry is not None:
            page = await self.client.read_after(key, entry.length)
            if page.version is not None and page.version.continues(entry.generation, entry.length, len(page.messages)):
                note_read("incremental")
                added = messages_from_meai(page.messages)
                extended = self._extend(key, entry, page.version, added)
                return extended if extended is not None else [*entry, *added]  # else: updated meanwhile
            log.debug("conversation %s changed beyond appends (version %s): loading all of it", key, page.version)
        note_read("full")
        page = await self.client.read(key)
        messages = messages_from_meai(page.messages)
        if page.version is None or page.version.count != len(messages):
            self._entries.pop(key, None)
            return messages
        fresh = CachedHistory(page.version.generation, page.version.count, messages)
        self._put(key, fresh)
        return fresh

    async def append(self, key: str, messages: Sequence[Message]) -> Version | None:
        """Append in one request; the new version (cached when it proves nobody wrote in between)."""
        body = encode_messages(messages_to_meai(messages))  # encode first: a bad message sends nothing
        entry = self._get(key)
        version = await self.client.append(key, body)
        if entry is not None:  # the cache gets exactly what a reader will decode
            self._extend(key, entry, version, messages_from_meai(json.loads(body)))
        return version

    async def replace(self, key: str, messages: Sequence[Message]) -> None:
        """Replace the conversation; the next read loads it whole."""
        body = encode_messages(messages_to_meai(messages))
        try:
            await self.client.replace(key, body)
        finally:
            self._entries.pop(key, None)

    def _get(self, key: str) -> CachedHistory | None:
        if (entry := self._entries.get(key)) is not None:
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
        if version is None or not version.continues(expected.generation, expected.length, len(added)):
            return None
        if self._entries.get(key) is not expected:
            return None
        expected.messages.extend(added)  # the current entry always ends its list: each extension replaces it
        entry = CachedHistory(version.generation, version.count, expected.messages)
        self._put(key, entry)
        return entry
