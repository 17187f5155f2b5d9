"""Who wrote a stored message, and how a conversation's authors are counted and ranked: the one home of both rules,
which the stores (counting at write time, docs/agents.md) and the service (``/participants``, ``?author=``) use.

A message's author is its MEAI ``authorName``; a message without one (a user's, or one written before authors)
counts for nobody."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from .stored_messages import object_mentioning

__all__ = ["author_of", "authors_of", "count_authors", "ranked"]

_MARK = b'"authorName"'


def author_of(message: bytes) -> str | None:
    """The message's ``authorName``, ``None`` when it has none (or it is not a string)."""
    item = object_mentioning(message, _MARK)
    author = item.get("authorName") if item is not None else None
    return author if isinstance(author, str) else None


def authors_of(messages: Iterable[bytes]) -> list[str | None]:
    """Each message's author in order (``None``: it has none), as a store passes them to its atomic write."""
    return [author_of(message) for message in messages]


def count_authors(messages: Iterable[bytes]) -> dict[str, int]:
    """How many of ``messages`` each author signed (authors of none are left out)."""
    return dict(Counter(author for author in authors_of(messages) if author is not None))


def ranked(counts: Mapping[str, int]) -> list[tuple[str, int]]:
    """The participants in their one order: the author with most messages first, ties by name (code point order;
    every store can keep this order, not all of them the order of first writes)."""
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))
