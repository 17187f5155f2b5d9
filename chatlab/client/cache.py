"""The provider's per-conversation cache: what it already loaded, and the version it was at.

The service's version of a conversation (its ``ETag``) is ``"<generation>.<count>"``: the
generation is a random token fixed from the conversation's creation (or its last replace)
until it is next replaced or deleted; the count is how many messages it holds. Within one
generation a conversation only grows, so the first ``count`` messages of a version stay what
they were for as long as the generation lasts. ``"0"`` is a conversation that does not exist.

That gives the provider a check that needs no trust in timing: it holds the first ``N``
messages of generation ``g``; it asks for the messages after ``N``; the answer is a
continuation of what it holds exactly when its version is ``g.M`` (same generation) with
``M = N + len(answer)``, or when it held nothing (``N = 0``). Anything else (another
generation: the conversation was replaced or deleted meanwhile; a count that does not add
up; a service that sends no such version) makes it load the whole conversation instead.
The same check lets it add its own appends to the cache without reading them back: the
append's answer says ``g.M``, and if ``M - len(batch) = N`` nobody else appended in between.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from agent_framework import Message

__all__ = ["CachedHistory", "HistoryCache", "Version", "parse_version"]


@dataclass(frozen=True, slots=True)
class Version:
    """A parsed conversation version: ``generation`` (``None`` if it does not exist) and message ``count``."""

    generation: str | None
    count: int

    def continues(self, generation: str | None, count: int, added: int) -> bool:
        """Whether this version is what holding ``count`` messages of ``generation`` plus ``added`` more gives."""
        return self.count == count + added and (
            count == 0 or (generation is not None and self.generation == generation)
        )


def parse_version(etag: str | None) -> Version | None:
    """The version in an ``ETag`` header (``"g.N"`` or ``"0"``), or ``None`` if it is not one."""
    if not etag:
        return None
    tag = etag.strip()
    if tag.startswith("W/") or len(tag) < 3 or tag[0] != '"' or tag[-1] != '"':
        return None
    tag = tag[1:-1]
    if tag == "0":
        return Version(None, 0)
    generation, dot, count = tag.rpartition(".")
    if not dot or not generation or not count.isdigit() or not count.isascii():
        return None
    return Version(generation, int(count))


@dataclass(slots=True)
class CachedHistory:
    """The first ``count`` messages of ``generation`` (``messages`` may be shared and longer: read ``view()``)."""

    generation: str | None
    count: int
    messages: list[Message]

    def view(self) -> list[Message]:
        return self.messages[: self.count]

    def extended(self, version: Version, added: list[Message]) -> CachedHistory:
        """The entry with ``added`` after it (appends in place when this entry owns the list's end)."""
        messages = self.messages if len(self.messages) == self.count else self.messages[: self.count]
        messages.extend(added)
        return CachedHistory(version.generation, version.count, messages)


class HistoryCache:
    """At most ``size`` conversations, least recently used dropped first. Not shared between threads."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[str, CachedHistory] = OrderedDict()

    def get(self, key: str) -> CachedHistory | None:
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def put(self, key: str, entry: CachedHistory) -> None:
        if self.size <= 0:
            return
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def replace_if(self, key: str, expected: CachedHistory | None, entry: CachedHistory) -> bool:
        """Store ``entry`` only if the key still holds ``expected`` (no other update came in between)."""
        if self._entries.get(key) is not expected:
            return False
        self.put(key, entry)
        return True

    def discard(self, key: str) -> None:
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
