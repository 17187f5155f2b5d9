"""Who wrote a stored message, and how a conversation's authors are counted and ranked: the one home of both rules,
which the stores (counting at write time, docs/agents.md) and the service (``/participants``, ``?author=``) use.

A message's author is its MEAI ``authorName``; a message without one (a user's, or one written before authors)
counts for nobody."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

__all__ = ["author_of", "count_authors", "ranked"]

_MARK = b'"authorName"'


class _Signed(msgspec.Struct):
    """The one field of a stored message this module reads (the decoder skips the others without building them)."""

    authorName: Any = None


_SIGNED = msgspec.json.Decoder(_Signed)


def author_of(message: bytes) -> str | None:
    """The message's ``authorName``, ``None`` when it has none (or it is not a string). Only a message whose bytes
    mention ``authorName`` is decoded: the stores count authors on every write."""
    if _MARK not in message:
        return None
    try:
        author = _SIGNED.decode(message).authorName
    except msgspec.DecodeError:  # not a JSON object (a ValidationError is one)
        return None
    return author if isinstance(author, str) else None


def count_authors(messages: Iterable[bytes]) -> dict[str, int]:
    """How many of ``messages`` each author signed, in the order they first signed (authors of none are left out);
    a plain loop: every append counts its batch."""
    counts: dict[str, int] = {}
    for message in messages:
        author = author_of(message)
        if author is not None:
            counts[author] = counts.get(author, 0) + 1
    return counts


def ranked(counts: Mapping[str, int]) -> list[tuple[str, int]]:
    """The participants in their one order: the author with most messages first, ties by name (code point order;
    every store can keep this order, not all of them the order of first writes)."""
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))
