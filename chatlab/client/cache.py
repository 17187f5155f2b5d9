"""The provider's per-conversation cache: what it already loaded, and the version it was at.

Within one generation (:class:`chatlab.vocabulary.Version`) a conversation only grows. Holding the first ``N``
messages of generation ``g``, the cache asks for those after ``N``: the answer continues them exactly when its version
is ``g.M`` with ``M = N + len(answer)``; anything else reloads it all. The same check adds the provider's own appends.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Sequence

from agent_framework import Message

from ..vocabulary import Version
from .codec import messages_from_meai, messages_to_meai
from .http import AsyncChatHistoryClient
from .operations import encode_messages

__all__ = ["HistoryCache"]

log = logging.getLogger(__name__)

# A conversation's generation and its first messages; the tuple is never changed, so a load hands out a list of it.
_Entry = tuple[str | None, tuple[Message, ...]]


class HistoryCache:
    """Up to ``size`` conversations, least recently used first out (``0``: none). Not shared between threads."""

    def __init__(self, client: AsyncChatHistoryClient, size: int) -> None:
        self.client = client
        self.size = size
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    async def load(self, key: str) -> list[Message]:
        """The whole conversation: what is cached plus what is new, else one full read."""
        if (entry := self._get(key)) is not None:
            generation, cached = entry
            page = await self.client.read_after(key, len(cached))
            if page.version is not None and page.version.continues(generation, len(cached), len(page.messages)):
                messages = [*cached, *messages_from_meai(page.messages)]
                self._extend(key, entry, page.version, messages)  # unless updated meanwhile
                return messages
            log.debug("conversation %s changed beyond appends (version %s): loading all of it", key, page.version)
        page = await self.client.read(key)
        messages = messages_from_meai(page.messages)
        if page.version is not None and page.version.count == len(messages):
            self._put(key, (page.version.generation, tuple(messages)))
        else:
            self._entries.pop(key, None)
        return messages

    async def append(self, key: str, messages: Sequence[Message]) -> Version | None:
        """Append in one request; the new version (cached when it proves nobody wrote in between)."""
        body = encode_messages(messages_to_meai(messages))  # encode first: a bad message sends nothing
        entry = self._get(key)
        version = await self.client.append(key, body)
        if entry is not None:  # the cache gets exactly what a reader will decode
            self._extend(key, entry, version, [*entry[1], *messages_from_meai(json.loads(body))])
        return version

    async def replace(self, key: str, messages: Sequence[Message]) -> None:
        """Replace the conversation; the next read loads it whole."""
        body = encode_messages(messages_to_meai(messages))
        try:
            await self.client.replace(key, body)
        finally:
            self._entries.pop(key, None)

    def _get(self, key: str) -> _Entry | None:
        if (entry := self._entries.get(key)) is not None:
            self._entries.move_to_end(key)
        return entry

    def _put(self, key: str, entry: _Entry) -> None:
        if self.size <= 0:
            return
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def _extend(self, key: str, expected: _Entry, version: Version | None, messages: list[Message]) -> None:
        """Cache ``messages`` (``expected``'s, then new ones) if ``version`` proves them, the entry unchanged."""
        generation, cached = expected
        if self._entries.get(key) is not expected or version is None:
            return
        if version.continues(generation, len(cached), len(messages) - len(cached)):
            self._put(key, (version.generation, tuple(messages)))
