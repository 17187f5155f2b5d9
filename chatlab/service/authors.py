"""Who took part in a conversation: each stored message's author (MEAI ``authorName``, docs/agents.md).

Read from the stored bytes: only messages whose bytes mention ``authorName`` are decoded. Several agents sharing one
conversation each sign their messages; the service lists them (``/participants``) and filters a read by one
(``?author=``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from .jsontext import object_mentioning

__all__ = ["author_of", "by_author", "participants"]

_MARK = b'"authorName"'


def author_of(message: bytes) -> str | None:
    """The message's ``authorName``, ``None`` when it has none (or it is not a string)."""
    item = object_mentioning(message, _MARK)
    author = item.get("authorName") if item is not None else None
    return author if isinstance(author, str) else None


def by_author(messages: Sequence[bytes], author: str) -> list[bytes]:
    """The messages ``author`` signed, in order."""
    return [message for message in messages if author_of(message) == author]


def participants(messages: Sequence[bytes]) -> list[tuple[str, int]]:
    """Each author and how many messages it signed, the one with most first (ties: the first to write first)."""
    counts = Counter(author for author in map(author_of, messages) if author is not None)
    return counts.most_common()  # Counter keeps first-seen order among equal counts
