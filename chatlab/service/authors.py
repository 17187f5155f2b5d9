"""A read filtered by author (``?author=``, docs/agents.md): the messages one agent signed, by the one author rule of
:mod:`chatlab.authors` (only messages whose bytes mention ``authorName`` are decoded). Who took part, by count, is
kept by the stores at write time and read from a conversation's summary (:mod:`.routes`)."""

from __future__ import annotations

from collections.abc import Sequence

from ..authors import author_of

__all__ = ["by_author"]


def by_author(messages: Sequence[bytes], author: str) -> list[bytes]:
    """The messages ``author`` signed, in order."""
    return [message for message in messages if author_of(message) == author]
